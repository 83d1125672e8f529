use super::*;
use serde_json::json;

fn scope(state: Value) -> Scope {
    Scope::new().with("state", Arc::new(state)).with(
        "input",
        Arc::new(json!({"name": "Ada", "items": [1, 2, 3]})),
    )
}

fn compiled(srcs: &[(&str, bool)]) -> Exprs {
    let mut e = Exprs::new();
    for (s, as_expr) in srcs {
        e.add(s, *as_expr).unwrap();
    }
    e
}

#[test]
fn python_style_conditions_work() {
    let c = "state.count < 5 and not state.get('is_valid', False)";
    let e = compiled(&[(c, true)]);
    assert!(e.truthy(c, &scope(json!({"count": 3}))).unwrap());
    assert!(
        !e.truthy(c, &scope(json!({"count": 3, "is_valid": true})))
            .unwrap()
    );
    assert!(!e.truthy(c, &scope(json!({"count": 7}))).unwrap());
}

#[test]
fn python_builtins_and_subscripts() {
    let c = "len(state.get(\"items\", [])) > 0 and state[\"name\"] == 'x'";
    let e = compiled(&[(c, true)]);
    assert!(
        e.truthy(c, &scope(json!({"items": [1], "name": "x"})))
            .unwrap()
    );
    assert!(!e.truthy(c, &scope(json!({"name": "x"}))).unwrap());
}

#[test]
fn single_expression_templates_keep_their_type() {
    let t = "{{ input.items }}";
    let e = compiled(&[(t, false), ("{{ input.items | length }}", false)]);
    assert_eq!(e.value(t, &scope(json!({}))).unwrap(), json!([1, 2, 3]));
    assert_eq!(
        e.value("{{ input.items | length }}", &scope(json!({})))
            .unwrap(),
        json!(3)
    );
}

#[test]
fn braces_inside_string_literals_keep_a_single_expression_typed() {
    let typed = "{{ input.items | length if '}}' != '{{' else 0 }}";
    let quoted = r#"{{ "{{" ~ input.name ~ "}}" }}"#;
    let two = "{{ input.name }} and {{ input.name }}";
    let e = compiled(&[(typed, false), (quoted, false), (two, false)]);
    let s = scope(json!({}));
    assert_eq!(
        e.value(typed, &s).unwrap(),
        json!(3),
        "a number, not the text 3"
    );
    assert_eq!(e.value(quoted, &s).unwrap(), json!("{{Ada}}"));
    assert_eq!(e.value(two, &s).unwrap(), json!("Ada and Ada"));
}

#[test]
fn text_templates_render() {
    let t = "Hello {{ input.name }}, you have {{ state.n }} items";
    let e = compiled(&[(t, false)]);
    assert_eq!(
        e.render(t, &scope(json!({"n": 2}))).unwrap(),
        "Hello Ada, you have 2 items"
    );
}

#[test]
fn value_templates_evaluate_nested_strings() {
    let tmpl = json!({"who": "{{ input.name }}", "n": ["{{ state.n + 1 }}", 7], "plain": "x"});
    let e = compiled(&[("{{ input.name }}", false), ("{{ state.n + 1 }}", false)]);
    assert_eq!(
        e.value_template(&tmpl, &scope(json!({"n": 1}))).unwrap(),
        json!({"who": "Ada", "n": [2, 7], "plain": "x"})
    );
}

#[test]
fn merge_and_omit_reshape_objects() {
    let t = "{{ merge(omit(input, 'items'), {'items': 9}) }}";
    let e = compiled(&[(t, false)]);
    assert_eq!(
        e.value(t, &scope(json!({}))).unwrap(),
        json!({"name": "Ada", "items": 9})
    );
}

#[test]
fn a_shared_map_reads_as_the_object_it_holds() {
    // The run state is bound as a shared map; every template reads it exactly as it
    // reads the same object bound as one value.
    let object = json!({"items": [1, 2, 3], "count": 2, "name": "Ada"});
    let map: crate::SharedMap = object
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), crate::Shared::new(v.clone())))
        .collect();
    let mut shared = Scope::new();
    shared.bind_map("state", Arc::new(map));
    let plain = scope(object.clone());
    let templates = [
        "{{ state }}",
        "{{ state.items[1] }}",
        "{{ state['name'] }}",
        "{{ state.items | length }}",
        "{{ pick(state, 'count', 'nope') }}",
        "{{ merge(state, {'count': 3}) }}",
        "n={{ state.count }} {{ state }}",
        "{% for k in state %}{{ k }} {% endfor %}",
    ];
    let conditions = [
        "state.count < 5 and state.get('missing', 7) == 7",
        "'items' in state",
        "state",
    ];
    let sources: Vec<(&str, bool)> = templates
        .iter()
        .map(|t| (*t, false))
        .chain(conditions.iter().map(|c| (*c, true)))
        .collect();
    let e = compiled(&sources);
    for t in templates {
        assert_eq!(
            e.value(t, &shared).unwrap(),
            e.value(t, &plain).unwrap(),
            "{t}"
        );
        assert_eq!(
            e.render(t, &shared).unwrap(),
            e.render(t, &plain).unwrap(),
            "{t}"
        );
    }
    for c in conditions {
        assert!(e.truthy(c, &shared).unwrap(), "{c}");
    }
    assert_eq!(e.value("{{ state }}", &shared).unwrap(), object);
    assert_eq!(shared.get("state"), Some(object));
}

#[test]
fn a_template_naming_a_bound_value_shares_it() {
    use crate::Shared;
    let output = Shared::new(json!({"big": [1, 2, 3]}));
    let s = Scope::new().with("output", output.clone());
    let e = compiled(&[("{{ output }}", false), ("{{ output.big }}", false)]);
    let shared = e.value_template_shared(&json!("{{ output }}"), &s).unwrap();
    assert!(Shared::ptr_eq(&shared, &output));
    let part = e
        .value_template_shared(&json!("{{ output.big }}"), &s)
        .unwrap();
    assert_eq!(part, json!([1, 2, 3]));
    let literal = e.value_template_shared(&json!({"k": 1}), &s).unwrap();
    assert_eq!(literal.as_json(), Some(&json!({"k": 1})));
}

#[test]
fn an_object_template_holding_a_bound_state_points_at_it() {
    use crate::{Shared, SharedMap};
    let items = Shared::new(json!([1, 2, 3]));
    let map: SharedMap = [("items".to_owned(), items.clone())].into_iter().collect();
    let mut s = Scope::new();
    s.bind_map("state", Arc::new(map))
        .bind("index", Arc::new(json!(4)));
    let e = compiled(&[("{{ state }}", false), ("{{ index }}", false)]);
    let template = json!({"state": "{{ state }}", "index": "{{ index }}", "ok": true});
    let result = e.value_template_shared(&template, &s).unwrap();
    assert_eq!(
        result,
        json!({"state": {"items": [1, 2, 3]}, "index": 4, "ok": true})
    );
    let inner = result.node().get("state").and_then(|n| n.get("items"));
    assert!(matches!(inner, Some(weft_value::Node::Shared(x)) if Shared::ptr_eq(x, &items)));
    // Nothing shared: one plain value, as before.
    let plain = e
        .value_template_shared(&json!({"index": "{{ index }}"}), &s)
        .unwrap();
    assert_eq!(plain.as_json(), Some(&json!({"index": 4})));
}

#[test]
fn an_expression_built_of_bound_values_shares_them() {
    use crate::{Shared, SharedMap};
    let items = Shared::new(json!([1, 2, 3]));
    let map: SharedMap = [
        ("items".to_owned(), items.clone()),
        ("count".to_owned(), Shared::new(json!(7))),
    ]
    .into_iter()
    .collect();
    let mut s = Scope::new();
    s.bind_map("state", Arc::new(map));
    let pick = "{{ pick(state, 'count', 'items') }}";
    let list = "{{ [state.items, state.count + 1, {'k': state.items}] }}";
    let made = "{{ {'n': state.count, 'r': range(2)} }}";
    let e = compiled(&[(pick, false), (list, false), (made, false)]);
    // TEA's arguments: the list is the state's own, not a copy made element by element.
    let picked = e.value_template_shared(&json!(pick), &s).unwrap();
    assert_eq!(picked, json!({"count": 7, "items": [1, 2, 3]}));
    let inner = picked.node().get("items");
    assert!(matches!(inner, Some(weft_value::Node::Shared(x)) if Shared::ptr_eq(x, &items)));
    // Lists and objects the expression makes are built around the bound parts they hold.
    let built = e.value_template_shared(&json!(list), &s).unwrap();
    assert_eq!(built, json!([[1, 2, 3], 8, {"k": [1, 2, 3]}]));
    let first = built.node().at(0);
    assert!(matches!(first, Some(weft_value::Node::Shared(x)) if Shared::ptr_eq(x, &items)));
    // Made of nothing bound: one plain value, equal to what rendering gives.
    let plain = e.value_template_shared(&json!(made), &s).unwrap();
    assert_eq!(plain.as_json(), Some(&json!({"n": 7, "r": [0, 1]})));
    assert_eq!(e.value(made, &s).unwrap(), json!({"n": 7, "r": [0, 1]}));
}

#[test]
fn pick_keeps_the_named_keys_an_object_has() {
    let t = "{{ pick(input, 'items', 'missing', 'name') }}";
    let e = compiled(&[(t, false)]);
    assert_eq!(
        e.value(t, &scope(json!({}))).unwrap(),
        json!({"items": [1, 2, 3], "name": "Ada"})
    );
    let wrong = "{{ pick(input.name, 'x') }}";
    let e = compiled(&[(wrong, false)]);
    let err = e.value(wrong, &scope(json!({}))).unwrap_err();
    assert!(
        err.message.contains("pick() takes an object"),
        "{}",
        err.message
    );
}

#[test]
fn syntax_errors_are_reported_at_compile_time() {
    let mut e = Exprs::new();
    let err = e.add("state.count <", true).unwrap_err();
    assert!(err.message.contains("state.count <"), "{}", err.message);
    assert!(e.add("{{ unclosed", false).is_err());
}

#[test]
fn runaway_templates_are_stopped_by_fuel() {
    let t = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
    let e = compiled(&[(t, false)]);
    let err = e.render(t, &scope(json!({}))).unwrap_err();
    assert!(err.message.contains("fuel"), "{}", err.message);
}

#[test]
fn lookups_do_not_copy_large_state() {
    let big: Vec<Value> = (0..100_000).map(|i| json!({"i": i})).collect();
    let c = "state.rows[99999].i == 99999 and state.rows | length == 100000";
    let e = compiled(&[(c, true)]);
    assert!(e.truthy(c, &scope(json!({"rows": big}))).unwrap());
}

#[test]
fn trailing_newlines_are_kept() {
    let t = "step {{ state.n }}\n";
    let e = compiled(&[(t, false)]);
    assert_eq!(e.render(t, &scope(json!({"n": 1}))).unwrap(), "step 1\n");
}

#[test]
fn text_keeps_strings_and_writes_other_values_as_json() {
    let t = "{{ text(input.name) }}|{{ input.items | text }}|{{ text(state) }}";
    let e = compiled(&[(t, false)]);
    assert_eq!(
        e.render(t, &scope(json!({"a": "<b>"}))).unwrap(),
        r#"Ada|[1,2,3]|{"a":"<b>"}"#
    );
}

#[test]
fn lookups_read_json_text_paths_numbers_and_patterns() {
    let srcs = [
        "at_path(json_or_text(state.raw), 'a.b') == 2",
        "at_path(json_or_text(state.raw), 'a.c') is none",
        "has_path(json_or_text(state.raw), 'a.n') and not has_path(state.raw, 'a')",
        "json_or_text(state.text) == 'not json'",
        "to_number('2.5') > 2 and to_number('x') is none and to_number(3) == 3",
        "search('^ap+le$', 'apple') and not search('z', 'apple')",
    ];
    let e = compiled(&srcs.map(|s| (s, true)));
    let s = scope(json!({"raw": "{\"a\": {\"b\": 2, \"n\": null}}", "text": "not json"}));
    for src in srcs {
        assert!(e.truthy(src, &s).unwrap(), "{src}");
    }
    let bad = "search('(', 'x')";
    let e = compiled(&[(bad, true)]);
    assert!(
        e.truthy(bad, &s)
            .unwrap_err()
            .message
            .contains("invalid pattern")
    );
}

/// Host functions for the `native()` tests: `double(n)` and `fail()`.
#[derive(Debug)]
struct HostFns;

impl Natives for HostFns {
    fn call(&self, name: &str, args: &[Value]) -> Result<Value, String> {
        match name {
            "double" => Ok(json!(args[0].as_i64().ok_or("not a number")? * 2)),
            "echo" => Ok(json!(args)),
            _ => Err(format!("no function named `{name}`")),
        }
    }
}

#[test]
fn native_calls_the_host_s_functions_with_json_values() {
    let sources = [
        ("native('double', len(input.items)) == 6", true),
        ("{{ native('echo', input, 1) }}", false),
        ("native('missing')", true),
    ];
    let e = compiled(&sources);
    let mut s = scope(json!({}));
    s.natives(Arc::new(HostFns));
    assert!(e.truthy(sources[0].0, &s).unwrap());
    assert_eq!(
        e.value(sources[1].0, &s).unwrap(),
        json!([{"name": "Ada", "items": [1, 2, 3]}, 1])
    );
    let err = e.truthy(sources[2].0, &s).unwrap_err().message;
    assert!(
        err.contains("native(`missing`): no function named `missing`"),
        "{err}"
    );
    // Without natives in the scope the call is a clear error, not a panic.
    let err = e
        .truthy(sources[0].0, &scope(json!({})))
        .unwrap_err()
        .message;
    assert!(err.contains("no native functions registered"), "{err}");
}

/// A template that only names a value is looked up in the JSON; the answer, key order
/// included, is what the template engine gives for the same expression in parentheses
/// (which is not a plain path, so the engine evaluates it).
#[test]
fn a_looked_up_value_is_the_one_the_engine_gives() {
    let state = json!({
        "z": 1, "a": {"y": [1, -2, 3.5, 1e20, 18446744073709551615u64], "b": null},
        "text": "héllo \"quoted\" {{ not a template }}", "flag": true, "empty": {},
        "list": [{"k v": "spaced"}, [], "x"], "0": "zero"
    });
    let s = scope(state);
    let paths = [
        "state",
        "state.z",
        "state.a",
        "state.a.y",
        "state.a.y[2]",
        "state.a.y[3]",
        "state.a.y[4]",
        "state.a.b",
        "state.text",
        "state.flag",
        "state.empty",
        "state.list[0]['k v']",
        "state.list[1]",
        "state['0']",
        "input",
        "input.items[0]",
        "state.missing",
        "state.a.y[9]",
        "state.text.x",
        "nothing",
    ];
    for p in paths {
        let fast = format!("{{{{ {p} }}}}");
        let slow = format!("{{{{ ({p}) }}}}");
        let mut e = Exprs::new();
        e.add(&fast, false).unwrap();
        e.add(&slow, false).unwrap();
        let (a, b) = (e.value(&fast, &s), e.value(&slow, &s));
        assert_eq!(
            a.as_ref()
                .map(Value::to_string)
                .map_err(|e| e.message.clone()),
            b.as_ref()
                .map(Value::to_string)
                .map_err(|e| e.message.clone()),
            "value of {p}"
        );
        let (a, b) = (e.render(&fast, &s), e.render(&slow, &s));
        assert_eq!(
            a.map_err(|e| e.message),
            b.map_err(|e| e.message),
            "text of {p}"
        );
    }
}

/// Random expressions made of path pieces: whenever the engine compiles one, the lookup
/// (when it answers) gives what the engine gives for the same expression in parentheses.
#[test]
fn random_paths_agree_with_the_engine() {
    const PIECES: &[&str] = &[
        "state", "input", ".", "a", "b", "items", "[0]", "[1]", "[7]", "['a']", "[\"b\"]",
        "['k v']", "[", "]", "'", "x", " ", "-1", "name", "_", "0",
    ];
    let s = scope(json!({
        "a": {"b": [{"a": 1}, "two", null], "k v": true},
        "b": "text", "items": [[1, 2], {"b": {"a": "deep"}}]
    }));
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut compared = 0;
    for _ in 0..20_000 {
        let len = 1 + (next() % 6) as usize;
        let expr: String = (0..len)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        let fast = format!("{{{{ {expr} }}}}");
        let slow = format!("{{{{ ({expr}) }}}}");
        let mut e = Exprs::new();
        if e.add(&fast, false).is_err() || e.add(&slow, false).is_err() {
            continue;
        }
        // Errors name their source, which differs by the parentheses; their presence
        // is what must agree.
        let a = e.value(&fast, &s).map(|v| v.to_string()).ok();
        let b = e.value(&slow, &s).map(|v| v.to_string()).ok();
        assert_eq!(a, b, "{expr}");
        compared += 1;
    }
    assert!(compared > 1_000, "only {compared} expressions compiled");
}

#[test]
fn reads_name_the_variables_and_paths_a_source_uses() {
    let sorted = |source: &str, as_expr: bool| {
        let mut r: Vec<String> = crate::reads(source, as_expr).unwrap().into_iter().collect();
        r.sort();
        r
    };
    assert_eq!(
        sorted("state.count < 5 and state['done'] != input.x", true),
        ["input.x", "state", "state.count"]
    );
    assert_eq!(
        sorted(
            "Hi {{ state.name }} {% for s in state.items %}{{ s.a }}{% endfor %}",
            false
        ),
        ["state.items", "state.name"]
    );
    assert_eq!(sorted("{{ state.get('x', 0) }}", false), ["state.get"]);
    assert!(crate::reads("{{ state.", false).is_none());
}
