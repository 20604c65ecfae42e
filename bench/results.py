"""A run's results as tables (markdown), and the targets judged on them; ``bench.report`` uses both too."""

from typing import Any


def fmt(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # noqa: PLR0124 (NaN check)


def report(results: dict[str, Any]) -> str:
    lines = []
    c = results["settings"]["concurrency"]
    lines.append(
        f"| operation | door | p50 ms (1 client) | p99 ms (1 client) | req/s ({c} clients) | p50 ms ({c}) "
        f"| p99 ms ({c}) | http/raw req/s | service-raw p50 ms | service/raw p50 | errors |"
    )
    lines.append("|" + "---|" * 11)
    for name, doors in results["ops"].items():
        raw = doors.get("raw")
        for door, v in doors.items():
            ratio_http = ratio_svc = delta = "-"
            if raw and door == "http" and raw["cN"]["rps"]:  # a door with no successful call has no ratio
                ratio_http = fmt(v["cN"]["rps"] / raw["cN"]["rps"])
            if raw and door == "service" and raw["c1"]["rps"]:
                delta = fmt(v["c1"]["p50_ms"] - raw["c1"]["p50_ms"])
                ratio_svc = fmt(v["c1"]["p50_ms"] / raw["c1"]["p50_ms"])
            errors = v["c1"]["errors"] + v["cN"]["errors"]
            lines.append(
                f"| {name} | {door} | {fmt(v['c1']['p50_ms'])} | {fmt(v['c1']['p99_ms'])} | {fmt(v['cN']['rps'], 0)} "  # noqa: E501
                f"| {fmt(v['cN']['p50_ms'])} | {fmt(v['cN']['p99_ms'])} | {ratio_http} | {delta} | {ratio_svc} | {errors} |"  # noqa: E501
            )
    if results["peers"]:
        head = (
            f"| peer operation | p50 ms (1 client) | p99 ms | req/s ({c} clients) | p50 ms ({c}) | p99 ms |"
        )
        lines += ["", head,
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for name, v in results["peers"].items():
            cn = v.get("cN", {})
            lines.append(
                f"| {name} | {fmt(v['c1']['p50_ms'])} | {fmt(v['c1']['p99_ms'])} | {fmt(cn.get('rps', float('nan')), 0)} "  # noqa: E501
                f"| {fmt(cn.get('p50_ms', float('nan')))} | {fmt(cn.get('p99_ms', float('nan')))} |"
            )
    if results["tail"]:
        lines += [
            "",
            "| upsert tail (1 client) | n | p50 ms | p99 ms | p99.9 ms | max ms | errors |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, v in results["tail"].items():
            lines.append(
                f"| {name} | {v['n']} | {fmt(v['p50_ms'])} | {fmt(v['p99_ms'])} | {fmt(v['p999_ms'])} "
                f"| {fmt(v['max_ms'])} | {v['errors']} |"
            )
    if results["explain"]:
        e = results["explain"]
        lines += ["", f"admin search '{e['term']}': {e['matching_rows']} matching rows (plans in the JSON)"]
    for name, doors in results["ops"].items():
        for door, v in doors.items():
            for label in ("c1", "cN"):
                if v[label]["errors"]:
                    lines.append(f"ERROR {name} / {door} / {label}: {v[label]['first_error']}")
    if results.get("targets"):
        lines += ["", "targets:"] + [
            f"- [{'met' if ok else 'NOT met'}] {text}" for text, ok in results["targets"]
        ]
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[tuple[str, bool]]:
    ops, out = results["ops"], []
    for name, doors in ops.items():
        if "raw" not in doors or "http" not in doors or not doors["raw"]["cN"]["rps"]:
            continue
        ratio = doors["http"]["cN"]["rps"] / doors["raw"]["cN"]["rps"]
        if name.startswith("recall") or name.startswith("upsert"):
            out.append((f"{name}: http throughput {ratio:.0%} of raw (>= 35 %)", ratio >= 0.35))
        if name.startswith("recall"):
            delta = doors["service"]["c1"]["p50_ms"] - doors["raw"]["c1"]["p50_ms"]
            out.append(
                (f"{name}: service adds {delta:.2f} ms to raw at the median (<= 0.5 ms)", delta <= 0.5)
            )
    search = ops.get("search per user (typical)", {}).get("service")
    if search:
        out.append(
            (
                f"search per user: service median {search['c1']['p50_ms']:.2f} ms (< 2 ms)",
                search["c1"]["p50_ms"] < 2,
            )
        )
    meaning = ops.get("search by meaning hybrid heaviest", {}).get("http")
    if meaning and results.get("data", {}).get("memories", 0) >= 1_000_000:  # issue 18's line, at 1M
        out.append(
            (
                f"hybrid recall, heaviest user at 1M, http: p50 {meaning['c1']['p50_ms']:.1f} ms (<= 40 ms)",
                meaning["c1"]["p50_ms"] <= 40,
            )
        )
    for name, doors in ops.items():
        if "langgraph" in doors and "http" in doors:
            h, p = doors["http"], doors["langgraph"]
            out.append((
                f"{name}: our http vs LangGraph PostgresStore in process: p50 {h['c1']['p50_ms']:.2f} vs "
                f"{p['c1']['p50_ms']:.2f} ms, {h['cN']['rps']:.0f} vs {p['cN']['rps']:.0f} req/s",
                h["c1"]["p50_ms"] < p["c1"]["p50_ms"] and h["cN"]["rps"] > p["cN"]["rps"],
            ))  # fmt: skip
    for name, v in results["tail"].items():
        out.append(
            (f"upsert tail {name}: p99.9 {v['p999_ms']:.1f} ms over {v['n']} (<= 50 ms)", v["p999_ms"] <= 50)
        )
    for name, counts in results["queries"].items():
        if "batch" in name or "upsert" in name:
            continue
        same = len({c["queries"] for c in counts}) == 1
        out.append(
            (
                f"queries {name}: {[c['queries'] for c in counts]} for {[c['items'] for c in counts]} items",
                same,
            )
        )
    return out
