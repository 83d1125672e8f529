//! # weft-expr
//!
//! Owns Weft's expression language: Jinja2-compatible templates (`Hello {{ input.name }}`)
//! and expressions (`state.count < 5 and not state.get('is_valid', False)`), built on
//! `minijinja` with Python-compatible methods and a few Python builtins (`len`, `str`,
//! `int`, ...), so conditions written for Python tools work unchanged.
//!
//! Each distinct source string is compiled once per flow ([`Exprs::add`]) and evaluated many
//! times against a [`Scope`] whose JSON values are exposed lazily, never converted whole.
//! Evaluation is bounded by a fuel limit, so a hostile template cannot spin forever.
//!
//! Depends on no other Weft crate but `weft-value` (the shared JSON value it reads): it
//! sees JSON values and names, nothing else.

mod functions;
mod json_object;
mod lookup;
mod path;
mod text_checks;

use minijinja::value::ValueKind;
use minijinja::{Environment, Expression, UndefinedBehavior, Value as MjValue};
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::sync::Arc;

pub use json_object::{shared_to_mj, to_mj};

/// Instructions one evaluation may execute before it is stopped.
pub const FUEL: u64 = 2_000_000;

/// An expression or template failed to compile or evaluate.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    /// What went wrong, with minijinja's detail.
    pub message: String,
    /// 1-based line inside the source, when known.
    pub line: Option<usize>,
}

impl ExprError {
    fn from_mj(source: &str, e: minijinja::Error) -> ExprError {
        let mut message = e.to_string();
        if let Some(detail) = e.detail()
            && !message.contains(detail)
        {
            message = format!("{message}: {detail}");
        }
        message = format!("{message} (in `{}`)", shorten(source));
        ExprError {
            message,
            line: e.line(),
        }
    }
}

fn shorten(s: &str) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() > 60 {
        format!("{}…", one_line.chars().take(60).collect::<String>())
    } else {
        one_line
    }
}

/// Functions a host program offers to templates as `native(name, args...)`: pure
/// functions of JSON values (they run again when a run is replayed).
pub trait Natives: Send + Sync + std::fmt::Debug {
    /// Calls the function registered as `name`; `Err` says why it failed (an unknown
    /// name included).
    fn call(&self, name: &str, args: &[Value]) -> Result<Value, String>;
}

pub use weft_value::{Shared, SharedMap};

/// The names visible to one evaluation: `input`, `state`, `initial`, `vars`, and locals.
///
/// Cloning is one reference count: an evaluation hands the template engine the scope
/// itself, and a scope is cloned for each one.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    inner: Arc<Bindings>,
}

#[derive(Debug, Clone, Default)]
struct Bindings {
    names: Vec<(Arc<str>, Shared)>,
    natives: Option<Arc<dyn Natives>>,
}

impl Scope {
    /// An empty scope.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// An empty scope with room for `n` bindings.
    pub fn with_capacity(n: usize) -> Scope {
        Scope {
            inner: Arc::new(Bindings {
                names: Vec::with_capacity(n),
                natives: None,
            }),
        }
    }

    /// The bindings, for a change (copied first when another scope shares them).
    fn bindings_mut(&mut self) -> &mut Bindings {
        Arc::make_mut(&mut self.inner)
    }

    /// Binds `name` (a later binding of the same name shadows an earlier one).
    pub fn bind(&mut self, name: impl Into<Arc<str>>, value: impl Into<Shared>) -> &mut Scope {
        self.bindings_mut().names.push((name.into(), value.into()));
        self
    }

    /// Binds `name` to an object whose values are shared, as [`Scope::bind`] does.
    pub fn bind_map(&mut self, name: impl Into<Arc<str>>, map: Arc<SharedMap>) -> &mut Scope {
        self.bindings_mut()
            .names
            .push((name.into(), Shared::Object(map)));
        self
    }

    /// The same scope with `name` bound.
    pub fn with(mut self, name: impl Into<Arc<str>>, value: impl Into<Shared>) -> Scope {
        self.bind(name, value);
        self
    }

    /// Adds every binding of `other` after this scope's own (and its natives, if it has
    /// them).
    pub fn extend(&mut self, other: &Scope) -> &mut Scope {
        if other.is_empty() && other.inner.natives.is_none() {
            return self;
        }
        let mine = self.bindings_mut();
        mine.names.extend(other.inner.names.iter().cloned());
        if other.inner.natives.is_some() {
            mine.natives = other.inner.natives.clone();
        }
        self
    }

    /// Makes `natives` callable as `native(name, args...)`.
    pub fn natives(&mut self, natives: Arc<dyn Natives>) -> &mut Scope {
        self.bindings_mut().natives = Some(natives);
        self
    }

    /// How many names are bound (a shadowed name counts each time).
    pub fn len(&self) -> usize {
        self.inner.names.len()
    }

    /// True when no name is bound.
    pub fn is_empty(&self) -> bool {
        self.inner.names.is_empty()
    }

    /// The value bound to `name` (a copy of a shared map's values).
    pub fn get(&self, name: &str) -> Option<Value> {
        self.bound(name).map(Shared::to_value)
    }

    /// The value bound to `name`, shared.
    pub fn bound(&self, name: &str) -> Option<&Shared> {
        self.inner
            .names
            .iter()
            .rev()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    /// Every binding, earliest first (a shadowed name appears each time).
    fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.names.iter().map(|(n, _)| &**n)
    }

    fn natives_bound(&self) -> Option<&Arc<dyn Natives>> {
        self.inner.natives.as_ref()
    }

    fn to_mj(&self) -> MjValue {
        MjValue::from_object(json_object::ScopeObject(self.clone()))
    }
}

enum Compiled {
    /// A template that is exactly one `{{ expression }}`: evaluated for its value; when
    /// the expression only names a value, that value is looked up first.
    Single(Expression<'static, 'static>, Option<path::Path>),
    /// A general template, rendered to text (stored in `texts` under its source).
    Text,
}

/// The compiled templates and expressions of one flow.
pub struct Exprs {
    env: &'static Environment<'static>,
    // Looked up by source on every evaluation: hashed with Fx, not SipHash (the sources
    // are the flow's own text, not an attacker's keys to collide).
    templates: FxHashMap<Box<str>, Compiled>,
    exprs: FxHashMap<Box<str>, Expression<'static, 'static>>,
    texts: Environment<'static>,
}

fn shared_env() -> &'static Environment<'static> {
    static ENV: std::sync::OnceLock<Environment<'static>> = std::sync::OnceLock::new();
    ENV.get_or_init(configured_env)
}

fn configured_env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(64);
    // Jinja2 drops one trailing newline; a flow writing `"line\n"` to a file means it.
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .keep_trailing_newline(true)
        .build()
        .expect("the default delimiters are valid");
    env.set_syntax(syntax);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    functions::register(&mut env);
    lookup::register(&mut env);
    text_checks::register(&mut env);
    env
}

impl Default for Exprs {
    fn default() -> Self {
        Exprs::new()
    }
}

impl Exprs {
    /// An empty set.
    pub fn new() -> Exprs {
        Exprs {
            env: shared_env(),
            templates: FxHashMap::default(),
            exprs: FxHashMap::default(),
            texts: configured_env(),
        }
    }

    /// Compiles `source` as a template (`as_expr == false`) or an expression, once.
    pub fn add(&mut self, source: &str, as_expr: bool) -> Result<(), ExprError> {
        if as_expr {
            if !self.exprs.contains_key(source) {
                let e = self
                    .env
                    .compile_expression_owned(source.to_owned())
                    .map_err(|e| ExprError::from_mj(source, e))?;
                self.exprs.insert(source.into(), e);
            }
            return Ok(());
        }
        if self.templates.contains_key(source) {
            return Ok(());
        }
        let compiled = if let Some(inner) = single_expression(source) {
            Compiled::Single(
                self.env
                    .compile_expression_owned(inner.to_owned())
                    .map_err(|e| ExprError::from_mj(source, e))?,
                path::Path::parse(inner),
            )
        } else {
            self.texts
                .add_template_owned(source.to_owned(), source.to_owned())
                .map_err(|e| ExprError::from_mj(source, e))?;
            Compiled::Text
        };
        self.templates.insert(source.into(), compiled);
        Ok(())
    }

    /// Renders a template to text. A non-string value from a single-expression template
    /// is written as JSON.
    pub fn render(&self, source: &str, scope: &Scope) -> Result<String, ExprError> {
        match self.template(source)? {
            Compiled::Text => {
                let t = self
                    .texts
                    .get_template(source)
                    .map_err(|e| ExprError::from_mj(source, e))?;
                t.render(scope.to_mj())
                    .map_err(|e| ExprError::from_mj(source, e))
            }
            Compiled::Single(e, path) => {
                let found = path.as_ref().and_then(|p| p.lookup(scope));
                match found.as_deref() {
                    Some(Value::String(s)) => return Ok(s.clone()),
                    Some(Value::Null) => return Ok(String::new()),
                    Some(j @ (Value::Array(_) | Value::Object(_))) => return Ok(j.to_string()),
                    _ => {}
                }
                let v = e
                    .eval(scope.to_mj())
                    .map_err(|e| ExprError::from_mj(source, e))?;
                Ok(match v.as_str() {
                    Some(s) => s.to_owned(),
                    None if v.is_undefined() || v.is_none() => String::new(),
                    None => {
                        let j = to_json(&v).map_err(|e| ExprError::from_mj(source, e))?;
                        match j {
                            Value::Array(_) | Value::Object(_) => j.to_string(),
                            _ => v.to_string(),
                        }
                    }
                })
            }
        }
    }

    /// Evaluates a template for its value: a single `{{ expression }}` keeps its type,
    /// anything else renders to a string.
    pub fn value(&self, source: &str, scope: &Scope) -> Result<Value, ExprError> {
        match self.template(source)? {
            Compiled::Text => self.render(source, scope).map(Value::String),
            Compiled::Single(e, path) => {
                if let Some(found) = path.as_ref().and_then(|p| p.lookup(scope)) {
                    return Ok(found.into_owned());
                }
                self.eval_single(source, e, scope)
            }
        }
    }

    fn eval_single(
        &self,
        source: &str,
        e: &Expression<'static, 'static>,
        scope: &Scope,
    ) -> Result<Value, ExprError> {
        let v = e
            .eval(scope.to_mj())
            .map_err(|e| ExprError::from_mj(source, e))?;
        to_json(&v).map_err(|e| ExprError::from_mj(source, e))
    }

    /// Evaluates an expression for its value.
    pub fn eval(&self, source: &str, scope: &Scope) -> Result<Value, ExprError> {
        let v = self.eval_mj(source, scope)?;
        to_json(&v).map_err(|e| ExprError::from_mj(source, e))
    }

    /// Evaluates an expression for its truth, as Python would judge it.
    pub fn truthy(&self, source: &str, scope: &Scope) -> Result<bool, ExprError> {
        Ok(self.eval_mj(source, scope)?.is_true())
    }

    /// Evaluates every string inside `template` (a JSON value) with [`Exprs::value`].
    pub fn value_template(&self, template: &Value, scope: &Scope) -> Result<Value, ExprError> {
        Ok(match template {
            Value::String(s) if is_template(s) => self.value(s, scope)?,
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| self.value_template(x, scope))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, x)| Ok((k.clone(), self.value_template(x, scope)?)))
                    .collect::<Result<_, ExprError>>()?,
            ),
            other => other.clone(),
        })
    }

    /// [`Exprs::value_template`], except that what a template only names (`"{{ output
    /// }}"`, `"{{ state.items }}"`) is that value itself, shared rather than copied, and
    /// an object or list template holding such a name is built around it: `{"state":
    /// "{{ state }}", "index": "{{ index }}"}` points at the state instead of copying it.
    pub fn value_template_shared(
        &self,
        template: &Value,
        scope: &Scope,
    ) -> Result<Shared, ExprError> {
        Ok(match self.part(template, scope)? {
            Part::Made(v) => Shared::new(v),
            Part::Bound(s, _) => s,
        })
    }

    /// The value of `template`: made by this evaluation, or a value bound in `scope`.
    fn part(&self, template: &Value, scope: &Scope) -> Result<Part, ExprError> {
        match template {
            Value::String(source) if is_template(source) => match self.template(source)? {
                Compiled::Single(e, path) => {
                    if let Some((found, container)) =
                        path.as_ref().and_then(|p| p.lookup_shared(scope))
                    {
                        return Ok(Part::Bound(found, container));
                    }
                    e.eval(scope.to_mj())
                        .and_then(|v| to_part(&v))
                        .map_err(|e| ExprError::from_mj(source, e))
                }
                Compiled::Text => self.render(source, scope).map(|t| Part::Made(t.into())),
            },
            Value::Array(a) => {
                let parts = a
                    .iter()
                    .map(|x| self.part(x, scope))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Part::from_items(parts))
            }
            Value::Object(m) => {
                let parts = m
                    .iter()
                    .map(|(k, x)| Ok((k.clone(), self.part(x, scope)?)))
                    .collect::<Result<Vec<_>, ExprError>>()?;
                Ok(Part::from_entries(parts))
            }
            other => Ok(Part::Made(other.clone())),
        }
    }

    fn eval_mj(&self, source: &str, scope: &Scope) -> Result<MjValue, ExprError> {
        let e = self.exprs.get(source).ok_or_else(|| not_compiled(source))?;
        e.eval(scope.to_mj())
            .map_err(|e| ExprError::from_mj(source, e))
    }

    fn template(&self, source: &str) -> Result<&Compiled, ExprError> {
        self.templates
            .get(source)
            .ok_or_else(|| not_compiled(source))
    }

    /// Number of distinct compiled sources.
    pub fn len(&self) -> usize {
        self.templates.len() + self.exprs.len()
    }

    /// True when nothing is compiled.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.exprs.is_empty()
    }
}

/// Whether a string of a value template is a template (else it stands for itself).
fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

/// Part of a value template's value.
enum Part {
    /// Made by this evaluation: held by nothing else.
    Made(Value),
    /// A value bound in the scope, or built around one; `true` when it is a container
    /// whatever holds it should point at rather than copy.
    Bound(Shared, bool),
}

impl Part {
    fn points(&self) -> bool {
        matches!(self, Part::Bound(_, true))
    }

    fn into_shared(self) -> Shared {
        match self {
            Part::Made(v) => Shared::new(v),
            Part::Bound(s, _) => s,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Part::Made(v) => v,
            Part::Bound(s, _) => s.into_value(),
        }
    }

    /// A list of `parts`: built around them when one is a bound container, else made.
    fn from_items(parts: Vec<Part>) -> Part {
        if parts.iter().any(Part::points) {
            Part::Bound(
                Shared::from(parts.into_iter().map(Part::into_shared).collect::<Vec<_>>()),
                true,
            )
        } else {
            Part::Made(Value::Array(
                parts.into_iter().map(Part::into_value).collect(),
            ))
        }
    }

    /// An object of `parts`, as [`Part::from_items`] builds a list.
    fn from_entries(parts: Vec<(String, Part)>) -> Part {
        if parts.iter().any(|(_, p)| p.points()) {
            let map: SharedMap = parts
                .into_iter()
                .map(|(k, p)| (k, p.into_shared()))
                .collect();
            Part::Bound(Shared::from(map), true)
        } else {
            Part::Made(Value::Object(
                parts
                    .into_iter()
                    .map(|(k, p)| (k, p.into_value()))
                    .collect(),
            ))
        }
    }
}

fn not_compiled(source: &str) -> ExprError {
    ExprError {
        message: format!(
            "internal: `{}` was not compiled with the flow",
            shorten(source)
        ),
        line: None,
    }
}

/// If `source` is exactly one `{{ ... }}` with nothing around it, the inner expression.
fn single_expression(source: &str) -> Option<&str> {
    let t = source.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.strip_prefix('-').unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    if has_delimiter_outside_strings(inner) {
        return None;
    }
    Some(inner.trim())
}

/// Whether `{{`, `}}`, `{%` or `{#` occurs in `expr` outside its string literals, so
/// that `{{ '{{' ~ name ~ '}}' }}` is still one expression but `{{ a }} and {{ b }}` is
/// a text template.
fn has_delimiter_outside_strings(expr: &str) -> bool {
    let bytes = expr.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None => {
                let pair = &bytes[i..(i + 2).min(bytes.len())];
                if matches!(pair, b"{{" | b"}}" | b"{%" | b"{#") {
                    return true;
                }
            }
        }
        i += 1;
    }
    false
}

/// The variables `source` (a template, or an expression when `as_expr`) reads from its
/// scope, with their trivial attribute paths (`state.count`, `input`; a subscript such
/// as `state['count']` reads `state` as a whole): names the source binds itself (a
/// `for` loop's variable, a `set`) are left out. A call's method is a path as well
/// (`state.get`). `None` when the source does not compile.
pub fn reads(source: &str, as_expr: bool) -> Option<std::collections::HashSet<String>> {
    let env = shared_env();
    if as_expr {
        return Some(
            env.compile_expression(source)
                .ok()?
                .undeclared_variables(true),
        );
    }
    if let Some(inner) = single_expression(source) {
        return Some(
            env.compile_expression(inner)
                .ok()?
                .undeclared_variables(true),
        );
    }
    // The shared environment parses as a flow's own would (same syntax), without
    // building and registering a new one for every template.
    Some(
        env.template_from_str(source)
            .ok()?
            .undeclared_variables(true),
    )
}

fn to_json(v: &MjValue) -> Result<Value, minijinja::Error> {
    if v.is_undefined() {
        return Ok(Value::Null);
    }
    serde_json::to_value(v)
        .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::BadSerialization, e.to_string()))
}

/// The value of an expression as a part: the views of bound values it is made of
/// (`pick(state, 'items')`, `[input.a, state.b]`) are shared, not converted element by
/// element (a TEA node's arguments over a state holding 100,000 items were converted so
/// on every call).
fn to_part(v: &MjValue) -> Result<Part, minijinja::Error> {
    if let Some(shared) = json_object::viewed(v) {
        let container = !matches!(shared.node().kind(), weft_value::Kind::Scalar(_));
        return Ok(Part::Bound(shared, container));
    }
    match v.kind() {
        // Only a list holding containers may hold a view: a list of scalars (`range(n)`,
        // perhaps long) is converted at once rather than item by item.
        ValueKind::Seq
            if v.try_iter()?
                .any(|item| matches!(item.kind(), ValueKind::Seq | ValueKind::Map)) =>
        {
            let parts = v
                .try_iter()?
                .map(|item| to_part(&item))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Part::from_items(parts))
        }
        // Each entry becomes a part (its key read once); the object is plain JSON when
        // none of them points at a bound value.
        ValueKind::Map => {
            let mut parts = Vec::new();
            for k in v.try_iter()? {
                let Some(key) = k.as_str() else {
                    return to_json(v).map(Part::Made);
                };
                parts.push((key.to_owned(), to_part(&v.get_item(&k)?)?));
            }
            Ok(Part::from_entries(parts))
        }
        _ => to_json(v).map(Part::Made),
    }
}

#[cfg(test)]
mod tests;
