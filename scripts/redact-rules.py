#!/usr/bin/env python3
"""Derives drover's vendored secret rules (assets/redact/gitleaks-rules.toml) from
gitleaks' default config (config/gitleaks.toml of github.com/gitleaks/gitleaks, MIT).

Usage: scripts/redact-rules.py PATH/TO/gitleaks.toml COMMIT > assets/redact/gitleaks-rules.toml

Kept per rule: id, regex, secret_group (gitleaks' secretGroup; 0 = the first non-empty
capture group, else the whole match), entropy, keywords, and the allowlists that look at
the secret or the match (stopwords, regexes). Rules that only match file paths are
dropped: drover redacts text, not files.
"""
import sys
import tomllib


def lit(s):
    if "'''" in s:
        raise SystemExit(f"a regex holds ''': {s}")
    return "'''" + s + "'''"


def strs(items):
    return "[" + ", ".join(lit(i) for i in items) + "]"


def main():
    path, commit = sys.argv[1], sys.argv[2]
    config = tomllib.load(open(path, "rb"))
    out = [
        "# Secret rules derived from gitleaks' default config (config/gitleaks.toml of",
        f"# github.com/gitleaks/gitleaks at {commit}; MIT License, Copyright (c) 2019",
        "# Zachary Rice) by scripts/redact-rules.py. Do not edit by hand: run the script again.",
        "",
    ]
    glob = config.get("allowlist", {})
    out.append("[allowlist]")
    out.append("regexes = " + strs(glob.get("regexes", [])))
    out.append("stopwords = " + strs(glob.get("stopwords", [])))
    out.append("")
    for rule in config["rules"]:
        if "regex" not in rule:
            continue
        out.append("[[rules]]")
        out.append(f"id = {lit(rule['id'])}")
        out.append(f"regex = {lit(rule['regex'])}")
        if rule.get("secretGroup"):
            out.append(f"secret_group = {rule['secretGroup']}")
        if rule.get("entropy"):
            out.append(f"entropy = {rule['entropy']}")
        out.append("keywords = " + strs(rule.get("keywords", [])))
        for allow in rule.get("allowlists", []):
            target = allow.get("regexTarget", "secret")
            if target not in ("secret", "match", "line"):
                continue
            if not allow.get("regexes") and not allow.get("stopwords"):
                continue
            # An allowlist that also needs a path (condition AND) can never hold for text.
            if allow.get("paths") and allow.get("condition", "OR") == "AND":
                continue
            out.append("[[rules.allowlists]]")
            out.append(f"target = {lit(target)}")
            out.append("regexes = " + strs(allow.get("regexes", [])))
            out.append("stopwords = " + strs(allow.get("stopwords", [])))
        out.append("")
    print("\n".join(out))


main()
