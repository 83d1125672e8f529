//! Lua views of JSON arguments: a large object or array reaches Lua as a table whose
//! entries are converted when the code reads them, so a step that reads one key of a
//! state holding 10,000 items converts one value, not 10,000.
//!
//! A view is an empty table with a shared metatable: reads go through `__index`, which
//! converts the entry (a large container becomes a view of its own, cached so that the
//! same entry is the same table each time it is read); `#` and `ipairs` see the backing
//! value's length. The first write, `pairs`, `next`, `rawget` or `rawlen` turns the view
//! into the plain table it stands for (its entries converted, nested views kept), after
//! which it is an ordinary table. Because a view holds no entries of its own until then,
//! every write reaches `__newindex`: a view never disagrees with its backing value. A
//! result that holds views is made plain before it is converted back to JSON.
//!
//! Each view keeps its backing value alive through the call's arguments (a shared value,
//! read where it lies: a state of 10,000 items is not copied for a step that reads one)
//! and a path into them; the call destroys its views when it ends.

use mlua::{AnyUserData, Function, Lua, LuaSerdeExt, Table, Value as LuaValue};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use weft_core::value::{Kind, Node, Shared};

/// Containers with fewer entries, none of them a container, are converted whole: a view
/// costs more than a small table, and most values code reads are small.
const LAZY_FROM: usize = 64;

/// Whether `v` reaches Lua as a view: a container that is long or holds containers
/// (a state of a few keys may hold a list of thousands).
fn is_large(v: Node<'_>) -> bool {
    let container = |x: Option<Node<'_>>| x.is_some_and(|x| !is_scalar(x));
    match v.kind() {
        Kind::Array(n) => n >= LAZY_FROM || (0..n).any(|i| container(v.at(i))),
        Kind::Object(n) => n >= LAZY_FROM || v.keys().into_iter().any(|k| container(v.get(k))),
        Kind::Scalar(_) => false,
    }
}

fn is_scalar(v: Node<'_>) -> bool {
    matches!(v.kind(), Kind::Scalar(_))
}

/// One step from a value to one of its entries.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Step {
    Key(String),
    Index(usize),
}

static NULL: Value = Value::Null;

/// What a view stands for: the entry of the call's arguments at `path`.
struct View {
    root: Shared,
    path: Vec<Step>,
    /// Entries read so far that are containers, so that a second read is the same table.
    children: HashMap<Step, LuaValue>,
}

impl View {
    fn value(&self) -> Node<'_> {
        self.path.iter().fold(self.root.node(), |v, step| {
            match step {
                Step::Key(k) => v.get(k),
                Step::Index(i) => v.at(*i),
            }
            .unwrap_or(Node::Json(&NULL))
        })
    }

    /// The entry a Lua key names in this view's value, and the step to it.
    fn entry(&self, key: &LuaValue) -> Option<(Step, Node<'_>)> {
        let value = self.value();
        let index = |i: usize| Some((Step::Index(i), value.at(i)?));
        match (value.kind(), key) {
            (Kind::Array(_), LuaValue::Integer(i)) => {
                index(usize::try_from(*i).ok()?.checked_sub(1)?)
            }
            (Kind::Array(_), LuaValue::Number(n)) if n.fract() == 0.0 && *n >= 1.0 => {
                index(*n as usize - 1)
            }
            (Kind::Object(_), LuaValue::String(s)) => {
                let k = s.to_str().ok()?;
                let entry = value.get(&k)?;
                Some((Step::Key(k.to_owned()), entry))
            }
            _ => None,
        }
    }

    fn child(&self, step: Step) -> (Shared, Vec<Step>) {
        let mut path = self.path.clone();
        path.push(step);
        (self.root.clone(), path)
    }
}

/// The views of one Lua state: the metatable they share, which table is which view, and
/// the views the running call made (destroyed when it ends).
#[derive(Clone)]
pub(crate) struct Views {
    meta: Table,
    /// View table -> its `View` userdata; weak keys, so a view dropped mid-call goes.
    by_table: Table,
    made: Arc<Mutex<Vec<AnyUserData>>>,
}

impl Views {
    /// The views machinery of `lua`, and `materialize` for the sandbox's replacements of
    /// `next`, `rawget` and `rawlen` (which would otherwise see a view's empty table).
    pub(crate) fn new(lua: &Lua) -> mlua::Result<(Views, Function)> {
        let by_table = lua.create_table()?;
        let weak = lua.create_table()?;
        weak.raw_set("__mode", "k")?;
        by_table.set_metatable(Some(weak))?;
        let views = Views {
            meta: lua.create_table()?,
            by_table,
            made: Arc::default(),
        };
        let v = views.clone();
        let index =
            lua.create_function(move |lua, (t, k): (Table, LuaValue)| v.index(lua, &t, &k))?;
        let v = views.clone();
        let new_index =
            lua.create_function(move |lua, (t, k, x): (Table, LuaValue, LuaValue)| {
                v.materialize(lua, &t)?;
                t.raw_set(k, x)
            })?;
        let v = views.clone();
        let len = lua.create_function(move |_, t: Table| {
            Ok(match v.view_of(&t)? {
                Some(ud) => match ud.borrow::<View>()?.value().kind() {
                    Kind::Array(n) => n,
                    _ => 0,
                },
                None => t.raw_len(),
            })
        })?;
        let raw_next: Function = lua.globals().get("next")?;
        let v = views.clone();
        let pairs = lua.create_function(move |lua, t: Table| {
            v.materialize(lua, &t)?;
            Ok((raw_next.clone(), t, LuaValue::Nil))
        })?;
        let v = views.clone();
        let materialize = lua.create_function(move |lua, x: LuaValue| match x {
            LuaValue::Table(t) => v.materialize(lua, &t),
            _ => Ok(()),
        })?;
        views.meta.raw_set("__index", index)?;
        views.meta.raw_set("__newindex", new_index)?;
        views.meta.raw_set("__len", len)?;
        views.meta.raw_set("__pairs", pairs)?;
        // Code cannot reach the metatable every call's views share.
        views.meta.raw_set("__metatable", false)?;
        Ok((views, materialize))
    }

    /// The value at `path` in `args`, for Lua: a view when it is a large container.
    fn expose(&self, lua: &Lua, args: &Shared, path: Vec<Step>) -> mlua::Result<LuaValue> {
        let view = View {
            root: args.clone(),
            path,
            children: HashMap::new(),
        };
        if !is_large(view.value()) {
            return lua.to_value(&view.value());
        }
        let table = lua.create_table()?;
        table.set_metatable(Some(self.meta.clone()))?;
        let ud = lua.create_any_userdata(view)?;
        self.by_table.raw_set(&table, &ud)?;
        self.made.lock().expect("lua views lock").push(ud);
        Ok(LuaValue::Table(table))
    }

    /// The whole arguments (a call of a function), or their entry `key` (a global).
    pub(crate) fn expose_arg(
        &self,
        lua: &Lua,
        args: &Shared,
        key: Option<&str>,
    ) -> mlua::Result<LuaValue> {
        let path = key
            .map(|k| vec![Step::Key(k.to_owned())])
            .unwrap_or_default();
        self.expose(lua, args, path)
    }

    fn view_of(&self, t: &Table) -> mlua::Result<Option<AnyUserData>> {
        if t.metatable()
            .is_none_or(|m| m.to_pointer() != self.meta.to_pointer())
        {
            return Ok(None);
        }
        self.by_table.raw_get(t)
    }

    fn index(&self, lua: &Lua, t: &Table, key: &LuaValue) -> mlua::Result<LuaValue> {
        let Some(ud) = self.view_of(t)? else {
            return Ok(LuaValue::Nil);
        };
        let (step, root, path) = {
            let view = ud.borrow::<View>()?;
            let Some((step, entry)) = view.entry(key) else {
                return Ok(LuaValue::Nil);
            };
            if let Some(c) = view.children.get(&step) {
                return Ok(c.clone());
            }
            if is_scalar(entry) {
                return lua.to_value(&entry);
            }
            let (root, path) = view.child(step.clone());
            (step, root, path)
        };
        let child = self.expose(lua, &root, path)?;
        ud.borrow_mut::<View>()?
            .children
            .insert(step, child.clone());
        Ok(child)
    }

    /// Turns view `t` into the plain table it stands for (nothing for any other table).
    fn materialize(&self, lua: &Lua, t: &Table) -> mlua::Result<()> {
        let Some(ud) = self.view_of(t)? else {
            return Ok(());
        };
        self.by_table.raw_remove(t)?;
        let view = ud.borrow::<View>()?;
        let array = matches!(view.value().kind(), Kind::Array(_));
        t.set_metatable(if array {
            Some(lua.array_metatable())
        } else {
            None
        })?;
        // Each entry as `index` would give it: a table already read stays that table.
        let put = |step: Step, entry: Node<'_>| {
            let x = match view.children.get(&step) {
                Some(c) => c.clone(),
                None if !is_scalar(entry) => {
                    let (root, path) = view.child(step.clone());
                    self.expose(lua, &root, path)?
                }
                None => lua.to_value(&entry)?,
            };
            match step {
                Step::Index(i) => t.raw_set(i + 1, x),
                Step::Key(k) => t.raw_set(k, x),
            }
        };
        let value = view.value();
        match value.kind() {
            Kind::Array(n) => (0..n).try_for_each(|i| match value.at(i) {
                Some(e) => put(Step::Index(i), e),
                None => Ok(()),
            }),
            Kind::Object(_) => value
                .keys()
                .into_iter()
                .try_for_each(|k| match value.get(k) {
                    Some(e) => put(Step::Key(k.to_owned()), e),
                    None => Ok(()),
                }),
            Kind::Scalar(_) => Ok(()),
        }
    }

    /// Makes every view reachable from `result` plain, so that it converts to JSON as
    /// the tables it stands for. Costs nothing when the call made no view.
    pub(crate) fn settle(&self, lua: &Lua, result: &LuaValue) -> mlua::Result<()> {
        if self.made.lock().expect("lua views lock").is_empty() {
            return Ok(());
        }
        let mut seen = HashSet::new();
        let mut todo: Vec<Table> = match result {
            LuaValue::Table(t) => vec![t.clone()],
            _ => return Ok(()),
        };
        while let Some(t) = todo.pop() {
            if !seen.insert(t.to_pointer()) {
                continue;
            }
            self.materialize(lua, &t)?;
            for pair in t.pairs::<LuaValue, LuaValue>() {
                if let (_, LuaValue::Table(x)) = pair? {
                    todo.push(x);
                }
            }
        }
        Ok(())
    }

    /// Ends the call: its views let go of its arguments, and any left in reach fail
    /// rather than show a later call's data.
    pub(crate) fn end_call(&self) {
        let made = std::mem::take(&mut *self.made.lock().expect("lua views lock"));
        for ud in made {
            let _ = ud.destroy();
        }
        let _ = self.by_table.clear();
    }
}

/// A result converted from Lua: the views it holds made plain first.
pub(crate) fn to_json(lua: &Lua, views: &Views, out: LuaValue) -> mlua::Result<Value> {
    views.settle(lua, &out)?;
    lua.from_value(out)
}
