# TEA's extraction validation (validate.extraction), run in Weft's Python sandbox: the
# structural layer, the facts for the Prolog layer, which items each semantic probe
# asks about, and the verdict as each layer's answers come in. The Prolog program and
# the model calls are Weft blocks around these functions. A record travels between
# them: {valid, errors, validated_at, facts?, probe_items?, probing}.
import datetime
import re


def structural_errors(entities, relationships, schema):
    """TEA's StructuralValidator: required fields, relationship types, the fields a
    type requires; its error records and messages."""
    entity_spec = schema.get("entities") or {}
    relationship_spec = schema.get("relationships") or {}
    errors = []
    for i, entity in enumerate(entities):
        for name in entity_spec.get("required_fields") or []:
            if entity.get(name) is None:
                errors.append({"type": "missing_required_field", "path": f"entities[{i}].{name}", "entity": entity, "expected": name, "actual": None, "message": f"Entity missing required field '{name}'"})
    types = relationship_spec.get("types") or []
    needs = relationship_spec.get("type_requirements") or {}
    for i, rel in enumerate(relationships):
        for name in relationship_spec.get("required_fields") or []:
            if rel.get(name) is None:
                errors.append({"type": "missing_required_field", "path": f"relationships[{i}].{name}", "relationship": rel, "expected": name, "actual": None, "message": f"Relationship missing required field '{name}'"})
        kind = rel.get("type")
        if types and kind not in types:
            errors.append({"type": "invalid_relationship_type", "path": f"relationships[{i}].type", "relationship": rel, "expected": types, "actual": kind, "message": f"Invalid relationship type '{kind}', expected one of {types}"})
        if kind and kind in needs:
            for name in needs[kind]:
                if rel.get(name) is None:
                    errors.append({"type": "missing_type_specific_field", "path": f"relationships[{i}].{name}", "relationship": rel, "expected": name, "actual": None, "message": f"Relationship type '{kind}' requires field '{name}'"})
    return errors


def atom(value):
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def prolog_facts(entities, relationships, confidence):
    """TEA's facts, entity/2 (entity/3 with a confidence) and relationship/3 to /6,
    after a clause that defines each, so a rule naming one with no facts fails."""
    lines = []
    for name in ["entity/2", "entity/3", "relationship/3", "relationship/4", "relationship/5", "relationship/6", "validation_error/2"]:
        functor, arity = name.split("/")
        lines.append(functor + "(" + ", ".join(["_"] * int(arity)) + ") :- fail.")
    for e in entities:
        args = [atom(e.get("name", "unknown")), atom(e.get("type", "unknown"))]
        if confidence and "confidence" in e:
            args.append(str(float(e["confidence"])))
        lines.append("entity(" + ", ".join(args) + ").")
    for r in relationships:
        args = [atom(r.get("type", "unknown")), atom(r.get("subject", "unknown")), atom(r.get("object", "unknown"))]
        if r.get("start_date") is not None and r.get("end_date") is not None:
            args = args + [atom(r["start_date"]), atom(r["end_date"])]
        if confidence and r.get("confidence") is not None:
            args.append(str(float(r["confidence"])))
        lines.append("relationship(" + ", ".join(args) + ").")
    return "\n".join(lines) + "\n"


def matches(where, item):
    """TEA's `where`: `field == 'value'` or `field != 'value'` (compared as text)."""
    if not where:
        return True
    found = re.match(r"(\w+)\s*(==|!=)\s*['\"]([^'\"]+)['\"]", where)
    if not found:
        return False
    same = str(item.get(found.group(1))) == found.group(3)
    return same if found.group(2) == "==" else not same


def check(entities, relationships, schema, rules, probes):
    if not isinstance(entities, list) or not isinstance(relationships, list):
        raise ValueError("validate.extraction: entities and relationships are lists")
    schema = schema or {}
    errors = structural_errors(entities, relationships, schema)
    record = {"valid": len(errors) == 0, "errors": errors, "validated_at": datetime.datetime.now().isoformat(), "probing": len(errors) == 0}
    if errors:
        return record
    if rules:
        record["facts"] = prolog_facts(entities, relationships, schema.get("confidence_tracking", False)) + rules
    items = {"entity": entities, "relationship": relationships}
    record["probe_items"] = [[i for i in items[p["for_each"]] if matches(p.get("where"), i)] for p in probes]
    return record


def after_constraints(record, found):
    """The Prolog layer's answer: each validation_error(Type, Context) as TEA's record."""
    if "prolog_error" in found:
        errors = [{"type": "prolog_error", "message": found["prolog_error"]}]
    else:
        errors = [{"type": "prolog_constraint_violation", "error_type": e[0], "context": e[1], "message": "Constraint violation: " + e[0] + "(" + e[1] + ")"} for e in found.get("errors", [])]
    record = dict(record)
    record.pop("facts", None)
    if errors:
        record["valid"] = False
        record["errors"] = errors
        record["probing"] = False
    return record


def after_probe(record, answers, probe):
    """One probe's answers, in the items' order: a `no` is an error; on a probe that
    rejects, the first stops the probing."""
    record = dict(record)
    errors = list(record["errors"])
    for a in answers:
        if a.get("error"):
            errors.append({"type": "probe_execution_error", "message": a["error"], "probe": probe["probe"], "question": a["question"], "item": a["item"]})
        elif not a["yes"]:
            errors.append({"type": "semantic_probe_failed", "probe": probe["probe"], "question": a["question"], "response": a["response"], "item": a["item"], "message": "LLM probe failed: " + a["question"]})
        else:
            continue
        if probe.get("on_fail", "reject") == "reject":
            record["probing"] = False
            break
    record["errors"] = errors
    record["valid"] = len(errors) == 0
    return record


def verdict(record):
    return {"valid": record["valid"], "errors": record["errors"], "validated_at": record["validated_at"]}
