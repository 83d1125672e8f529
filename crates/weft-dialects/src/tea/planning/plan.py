# TEA's planner's bookkeeping (plan.decompose, .execute, .replan, .status), run in
# Weft's Python sandbox. The model calls and the subtasks' actions are Weft blocks
# around these functions; each function takes and returns plain data.
import json
import time
import hashlib

STATUSES = ["pending", "in_progress", "completed", "failed", "skipped"]


def read_json(text):
    """The JSON object in a model's answer, read as TEA reads it, else None."""
    text = text if isinstance(text, str) else json.dumps(text)
    try:
        return json.loads(text)
    except Exception:
        pass
    fence = text.find("```")
    if fence >= 0:
        start = text.find("\n", fence)
        end = text.find("```", fence + 3)
        if start >= 0 and end > start:
            try:
                return json.loads(text[start:end].strip())
            except Exception:
                pass
    first = text.find("{")
    last = text.rfind("}")
    if first >= 0 and last > first:
        try:
            return json.loads(text[first:last + 1])
        except Exception:
            pass
    return None


def subtask(data, fallback_id):
    return {
        "id": data.get("id", fallback_id),
        "description": data.get("description", ""),
        "dependencies": data.get("dependencies", []),
        "status": "pending",
        "result": None,
        "error": None,
        "retry_count": 0,
        "started_at": None,
        "completed_at": None,
    }


def plan_id(prefix, goal, subtasks):
    seed = json.dumps([goal, subtasks, time.time()])
    return prefix + hashlib.sha256(seed.encode()).hexdigest()[:8]


def dag_error(subtasks):
    """TEA's check of a plan: known dependencies and no cycle; None when it holds."""
    ids = [s["id"] for s in subtasks]
    for s in subtasks:
        for dep in s["dependencies"]:
            if dep not in ids:
                return "Subtask '" + str(s["id"]) + "' depends on unknown subtask '" + str(dep) + "'"
    dependents = {}
    for i in ids:
        dependents[i] = []
    for s in subtasks:
        for dep in s["dependencies"]:
            dependents[dep].append(s["id"])
    color = {}
    for i in ids:
        color[i] = 0
    for root in ids:
        if color[root] != 0:
            continue
        # Depth-first, with an explicit stack of (node, next child index).
        path = [root]
        color[root] = 1
        stack = [[root, 0]]
        while stack:
            top = stack[-1]
            children = dependents[top[0]]
            if top[1] < len(children):
                child = children[top[1]]
                top[1] = top[1] + 1
                if color[child] == 1:
                    cycle = path[path.index(child):] + [child]
                    return "Cycle detected: " + " -> ".join([str(c) for c in cycle])
                if color[child] == 0:
                    color[child] = 1
                    path.append(child)
                    stack.append([child, 0])
            else:
                color[top[0]] = 2
                path.pop()
                stack.pop()
    return None


def topological(subtasks):
    """Kahn's order, the smallest id first among those ready (TEA's order)."""
    degree = {}
    dependents = {}
    for s in subtasks:
        degree[s["id"]] = len(s["dependencies"])
        dependents[s["id"]] = []
    for s in subtasks:
        for dep in s["dependencies"]:
            dependents[dep].append(s["id"])
    queue = [i for i in degree if degree[i] == 0]
    order = []
    while queue:
        queue = sorted(queue)
        current = queue.pop(0)
        order.append(current)
        for d in dependents[current]:
            degree[d] = degree[d] - 1
            if degree[d] == 0:
                queue.append(d)
    return order


def counts(plan):
    c = {"pending": 0, "in_progress": 0, "completed": 0, "failed": 0, "skipped": 0}
    for s in plan["subtasks"]:
        if s["status"] in c:
            c[s["status"]] = c[s["status"]] + 1
    c["total"] = len(plan["subtasks"])
    return c


def readable(plan):
    """Whether `plan` has what TEA's Plan.from_dict needs; else the error it raises."""
    if not isinstance(plan, dict):
        return "Invalid plan type: " + type(plan).__name__
    for key in ["id", "goal"]:
        if key not in plan:
            return "'" + key + "'"
    for s in plan.get("subtasks", []):
        for key in ["id", "description"]:
            if key not in s:
                return "'" + key + "'"
        if s.get("status", "pending") not in STATUSES:
            return "'" + str(s.get("status")) + "' is not a valid SubtaskStatus"
    return None


def filled(plan):
    """A plan with TEA's defaults for what it leaves out."""
    out = dict(plan)
    out["strategy"] = plan.get("strategy", "flat")
    out["metadata"] = plan.get("metadata", {})
    subtasks = []
    for s in plan.get("subtasks", []):
        full = subtask(s, s["id"])
        for key in ["status", "result", "error", "retry_count", "started_at", "completed_at"]:
            if key in s:
                full[key] = s[key]
        subtasks.append(full)
    out["subtasks"] = subtasks
    return out


def decompose(content, goal, strategy, model, max_subtasks):
    trace = [{"step": "decompose_start", "timestamp": time.time(), "goal": goal, "strategy": strategy, "model": model}]
    parsed = read_json(content)
    if not isinstance(parsed, dict):
        snippet = str(content)[:200]
        return {"error": "Failed to parse plan: Could not parse JSON from response: " + snippet + "...", "success": False, "planning_trace": trace}
    items = parsed.get("subtasks", [])
    if not items:
        return {"error": "No subtasks returned from LLM", "success": False, "planning_trace": trace}
    if len(items) > max_subtasks:
        trace.append({"step": "subtasks_truncated", "timestamp": time.time(), "original_count": len(items), "truncated_to": max_subtasks})
        items = items[:max_subtasks]
    subtasks = []
    for item in items:
        subtasks.append(subtask(item, "subtask_" + str(len(subtasks) + 1)))
    error = dag_error(subtasks)
    if error:
        return {"error": "Invalid plan structure: " + error, "success": False, "planning_trace": trace}
    plan = {
        "id": plan_id("plan_", goal, items),
        "goal": goal,
        "strategy": strategy,
        "subtasks": subtasks,
        "metadata": {"created_at": time.time(), "replan_count": 0, "max_replans": 3},
    }
    trace.append({"step": "decompose_complete", "timestamp": time.time(), "subtask_count": len(subtasks), "plan_id": plan["id"]})
    return {"plan": plan, "planning_trace": trace, "success": True, "plan_id": plan["id"], "subtask_count": len(subtasks)}


def status(plan, include_completed, include_details):
    if not plan:
        return {"error": "No plan found", "success": False}
    problem = readable(plan)
    if problem:
        return {"error": "Status check failed: " + problem, "success": False}
    plan = filled(plan)
    c = counts(plan)
    done = c["completed"] + c["skipped"]
    result = {"status": c, "progress": done / c["total"] if c["total"] > 0 else 1.0, "plan_id": plan["id"], "goal": plan["goal"], "success": True}
    if include_details:
        result["subtasks"] = [s for s in plan["subtasks"] if include_completed or s["status"] != "completed"]
    return result


def start(plan, results, replans, options):
    """plan.execute's record before its first wave, or its result when it cannot run."""
    record = {"done": False, "outcome": None, "results": dict(results or {}), "replans": replans or 0, "waves": 0, "sleep_ms": 0, "replan": None, "batch": [], "options": options}
    if not plan:
        record["done"] = True
        record["outcome"] = {"error": "No plan provided. Use plan.decompose first or provide plan parameter.", "success": False}
        return record
    problem = readable(plan)
    if problem:
        record["done"] = True
        record["outcome"] = {"error": "Plan execution failed: " + problem, "success": False, "planning_trace": []}
        return record
    record["plan"] = filled(plan)
    record["trace"] = [{"step": "execute_start", "timestamp": time.time(), "plan_id": plan["id"], "parallel": options["parallel"], "max_concurrent": options["max_concurrent"], "failure_strategy": options["on_subtask_failure"]}]
    error = dag_error(record["plan"]["subtasks"])
    if error:
        record["done"] = True
        record["outcome"] = {"error": "Cannot compute topological order: " + error, "success": False, "planning_trace": record["trace"]}
        return record
    return next_wave(record)


def find(plan, subtask_id):
    for s in plan["subtasks"]:
        if s["id"] == subtask_id:
            return s
    return None


def next_wave(record):
    """The next subtasks to run at once; the record is done when none is left."""
    plan = record["plan"]
    record["batch"] = []
    record["replan"] = None
    if record["options"]["parallel"]:
        finished = [s["id"] for s in plan["subtasks"] if s["status"] in ["completed", "skipped"]]
        ready = [s for s in plan["subtasks"] if s["status"] == "pending" and all([d in finished for d in s["dependencies"]])]
        if not ready:
            pending = [s for s in plan["subtasks"] if s["status"] == "pending"]
            failed = [s for s in plan["subtasks"] if s["status"] == "failed"]
            if pending and not failed:
                return stop(record, "Execution stuck - no ready subtasks but pending remain")
            record["done"] = True
            return record
        ready = ready[:record["options"]["max_concurrent"]]
    else:
        ready = []
        for subtask_id in topological(plan["subtasks"]):
            s = find(plan, subtask_id)
            if s["status"] == "pending":
                ready = [s]
                break
        if not ready:
            record["done"] = True
            return record
    now = time.time()
    for s in ready:
        s["status"] = "in_progress"
        s["started_at"] = now
    record["batch"] = [dict(s) for s in ready]
    record["waves"] = record["waves"] + 1
    return record


def stop(record, error):
    """Ends plan.execute with TEA's failed result."""
    record["done"] = True
    record["outcome"] = {"error": error, "success": False, "plan": record["plan"], "subtask_results": record["results"], "planning_trace": record["trace"]}
    return record


def advance(record, outcomes):
    """Applies a wave's outcomes (`{ok, result, error}` in batch order) as the failure
    strategy says; then the next wave, unless the run stops or asks for a new plan."""
    options = record["options"]
    record["sleep_ms"] = 0
    for i, ran in enumerate(outcomes):
        s = find(record["plan"], record["batch"][i]["id"])
        now = time.time()
        if ran.get("ok"):
            s["status"] = "completed"
            s["completed_at"] = now
            s["result"] = ran.get("result")
            record["results"][s["id"]] = s["result"]
            record["trace"].append({"step": "subtask_" + str(s["id"]) + "_complete", "timestamp": now, "duration": now - (s["started_at"] or now)})
            continue
        error = str(ran.get("error") or "Unknown error")
        strategy = options["on_subtask_failure"]
        if strategy == "skip":
            s["status"] = "skipped"
            s["error"] = error
            s["completed_at"] = now
            record["trace"].append({"step": "subtask_" + str(s["id"]) + "_skipped", "timestamp": now, "error": error})
        elif strategy == "retry" and s["retry_count"] < options["max_retries"]:
            s["retry_count"] = s["retry_count"] + 1
            s["status"] = "pending"
            delay = options["retry_delay"] * (2 ** (s["retry_count"] - 1))
            record["sleep_ms"] = max(record["sleep_ms"], int(delay * 1000))
            record["trace"].append({"step": "subtask_" + str(s["id"]) + "_retry_" + str(s["retry_count"]), "timestamp": now, "delay": delay})
        elif strategy == "replan" and record["replans"] < options["max_replans"]:
            record["trace"].append({"step": "triggering_replan", "timestamp": now, "failed_subtask": s["id"], "replan_count": record["replans"] + 1})
            record["replan"] = {"failed_subtask": s["id"], "failure_reason": error, "prompt": replan_prompt(record["plan"], s["id"], error)}
            return record
        else:
            s["status"] = "failed"
            s["completed_at"] = now
            if strategy == "retry":
                s["error"] = "Max retries (" + str(options["max_retries"]) + ") exceeded: " + error
                record["trace"].append({"step": "subtask_" + str(s["id"]) + "_max_retries", "timestamp": now, "error": s["error"]})
            elif strategy == "replan":
                s["error"] = "Max replans (" + str(options["max_replans"]) + ") exceeded: " + error
                record["trace"].append({"step": "subtask_" + str(s["id"]) + "_max_replans", "timestamp": now, "error": s["error"]})
            else:
                s["error"] = error
                record["trace"].append({"step": "subtask_" + str(s["id"]) + "_failed_abort", "timestamp": now, "error": error})
            return stop(record, s["error"])
    return next_wave(record)


def replan_prompt(plan, failed, reason):
    done = [s for s in plan["subtasks"] if s["status"] == "completed"]
    rest = [s for s in plan["subtasks"] if s["status"] != "completed"]
    done_lines = "\n".join(["- " + str(s["id"]) + ": " + s["description"] + " (result: " + str(s["result"])[:100] + ")" for s in done]) or "None"
    rest_lines = "\n".join(["- " + str(s["id"]) + ": " + s["description"] for s in rest]) or "None"
    return (
        "A subtask of this plan failed; plan the remaining work again.\n\n"
        + "Goal: " + plan["goal"] + "\n\n"
        + "Completed subtasks (they stay as they are):\n" + done_lines + "\n\n"
        + "Remaining subtasks (change them as needed):\n" + rest_lines + "\n\n"
        + "Failed subtask: " + str(failed) + "\nWhy it failed: " + reason + "\n\n"
        + "You may retry the failed subtask another way, add or remove subtasks, or change dependencies; a new subtask may depend on the completed ones ("
        + ", ".join([str(s["id"]) for s in done]) + ").\n\n"
        + "Reply with JSON only: {\"subtasks\": [{\"id\": \"...\", \"description\": \"...\", \"dependencies\": [\"...\"]}], \"adjustment_rationale\": \"why\"}"
    )


def replanned(plan, content):
    """A plan from the model's new subtasks, the completed ones kept; or an error."""
    parsed = read_json(content)
    if not isinstance(parsed, dict):
        return {"error": "Failed to parse replan: Could not parse JSON from response: " + str(content)[:200] + "...", "success": False}
    done = [s for s in plan["subtasks"] if s["status"] == "completed"]
    fresh = []
    for item in parsed.get("subtasks", []):
        fresh.append(subtask(item, "replan_subtask_" + str(len(fresh) + 1)))
    metadata = dict(plan.get("metadata", {}))
    metadata["replan_count"] = metadata.get("replan_count", 0) + 1
    metadata["replanned_at"] = time.time()
    new = {"id": plan_id("replan_", plan["goal"], fresh), "goal": plan["goal"], "strategy": plan.get("strategy", "flat"), "subtasks": done + fresh, "metadata": metadata}
    error = dag_error(new["subtasks"])
    if error:
        return {"error": "Replanned structure invalid: " + error, "success": False}
    return {"plan": new, "preserved_subtasks": len(done), "new_subtasks": len(fresh), "rationale": parsed.get("adjustment_rationale", ""), "success": True}


def after_replan(record, content):
    request = record["replan"]
    outcome = replanned(record["plan"], content)
    if not outcome["success"]:
        s = find(record["plan"], request["failed_subtask"])
        s["status"] = "failed"
        s["error"] = "Replan failed: " + outcome["error"]
        return stop(record, s["error"])
    outcome["plan"]["metadata"]["replan_reason"] = request["failure_reason"]
    record["plan"] = outcome["plan"]
    record["replans"] = record["replans"] + 1
    record["trace"].append({"step": "replan_complete", "timestamp": time.time(), "preserved_subtasks": outcome["preserved_subtasks"], "new_subtasks": outcome["new_subtasks"], "rationale": outcome["rationale"]})
    return next_wave(record)


def finish(record, max_waves):
    """plan.execute's result."""
    if record["outcome"]:
        return record["outcome"]
    if not record["done"]:
        return stop(record, "plan.execute stopped after " + str(max_waves) + " waves of subtasks")["outcome"]
    c = counts(record["plan"])
    record["trace"].append({"step": "execute_complete", "timestamp": time.time(), "status_counts": c})
    return {"plan": record["plan"], "subtask_results": record["results"], "plan_status": c, "replan_count": record["replans"], "planning_trace": record["trace"], "success": c["failed"] == 0 and c["pending"] == 0}


def standalone_replan(plan, results, failed, reason, content):
    """plan.replan's result, from the model's answer to `replan_prompt`."""
    trace = [{"step": "replan_start", "timestamp": time.time(), "plan_id": plan["id"], "failed_subtask": failed, "failure_reason": reason}]
    outcome = replanned(plan, content)
    outcome["planning_trace"] = trace
    if outcome["success"]:
        outcome["plan"]["metadata"]["replan_reason"] = reason
        trace.append({"step": "replan_complete", "timestamp": time.time(), "preserved_subtasks": outcome["preserved_subtasks"], "new_subtasks": outcome["new_subtasks"], "rationale": outcome.pop("rationale")})
    return outcome
