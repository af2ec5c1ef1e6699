#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The shape of src/: the include graph between modules, the largest files, the longest functions.

    source-map.py [--src DIR] [--dot] [--top N] [--check] [--doc docs/architecture.md]

A module is a folder below src/ (src/workspace/cas/ counts as workspace/cas); an include of
"module/name.h" from a file of another module is an edge between the two. The report lists the
modules and their edges, every circle between modules (a strongly connected component of more than
one module, or a module that another reaches and that reaches it back), the N largest files and the
N longest functions.

--check fails (exit 1) when there is a circle between modules, a file in src/ over FILE_MAX lines,
or a function over FUNCTION_MAX lines: the limits docs/architecture.md sets for the tree.
--doc FILE also checks the table of the section "## Module map" of FILE: each module of src/ has
a row, each row a module, and each include between modules is one that its row allows.
--dot prints the module graph in Graphviz's dot language instead.
"""

import argparse
import os
import re
import sys

FILE_MAX = 800
FUNCTION_MAX = 120

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A function definition in the style of the tree: the name and its parameters at column 0 (after
# the return type), the body's opening brace at the end of that line or the next ones, the closing
# brace alone at column 0; an attribute macro (_printf_(2, 3)) may stand first.
FUNCTION_START = re.compile(r'^(?:_\w+_\([^)]*\)\s+)?(?!static\s+const\b)[A-Za-z_][^;=()]*\b([A-Za-z_]\w*)\s*\(')


def module_of(path, src):
    rel = os.path.relpath(path, src)
    d = os.path.dirname(rel)
    return d if d else "(top)"


def sources(src):
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(root, f)


def resolve(inc, path, src):
    """The file an include names: relative to the including file's folder, else to src/."""
    for base in (os.path.dirname(path), src):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(p):
            return p
    return None


def doc_rules(path):
    """{module: set of modules it may include} from the table of the section "## Module map"."""
    rules, inside = {}, False
    with open(path) as fh:
        for line in fh:
            if line.startswith("## "):
                inside = line.strip() == "## Module map"
                continue
            if not inside or not line.startswith("| `"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3:
                continue
            name = re.findall(r"`([^`]+)`", cells[0])[0]
            allowed = re.findall(r"`([^`]+)`", re.sub(r"\([^)]*\)", "", cells[2]))
            rules[name] = set(allowed)
    return rules


def unit_of(path, src):
    """A .c file and its .h are one unit: src/execution/execution.{c,h} is execution/execution; a
    private header X-internal.h is X's (the files split out of X include it, and it X's header)."""
    u = os.path.splitext(os.path.relpath(path, src))[0]
    return u[:-len("-internal")] if u.endswith("-internal") else u


def graph(src, key=module_of):
    edges = {}
    files = list(sources(src))
    for path in files:
        m = key(path, src)
        edges.setdefault(m, {})
        with open(path, errors="replace") as fh:
            for line in fh:
                mo = INCLUDE.match(line)
                if not mo:
                    continue
                target = resolve(mo.group(1), path, src)
                if not target or not target.startswith(os.path.abspath(src) + os.sep) and \
                        not os.path.abspath(target).startswith(os.path.abspath(src) + os.sep):
                    continue
                tm = key(target, src)
                if tm != m:
                    edges[m].setdefault(tm, []).append(
                        f"{os.path.relpath(path, src)} -> {os.path.relpath(target, src)}")
    return files, edges


def circles(edges):
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def functions(path):
    """(name, first line, number of lines) of each function defined at column 0."""
    out = []
    with open(path, errors="replace") as fh:
        lines = fh.readlines()
    i = 0
    while i < len(lines):
        mo = FUNCTION_START.match(lines[i])
        if mo and not lines[i].startswith(("typedef", "struct", "enum", "#", "extern")):
            # the opening brace of a body, before any ';' (a prototype) within the next lines
            j = i
            body = None
            while j < len(lines) and j < i + 12:
                if lines[j].rstrip().endswith(";") and "{" not in lines[j]:
                    break
                if lines[j].rstrip().endswith("{"):
                    body = j
                    break
                j += 1
            if body is not None:
                k = body + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                out.append((mo.group(1), i + 1, k - i + 1))
                i = k
        i += 1
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "..", "src"))
    ap.add_argument("--dot", action="store_true")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--doc")
    a = ap.parse_args()
    src = os.path.abspath(a.src)

    files, edges = graph(src)
    cyc = circles(edges)

    if a.dot:
        print("digraph modules {")
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print(f'  "{m}" -> "{t}";')
        print("}")
        return 0

    print(f"{len(files)} files in {len(edges)} modules")
    print("\nmodule edges (who includes whom):")
    for m in sorted(edges):
        print(f"  {m} -> {', '.join(sorted(edges[m])) or '-'}")
    _, unit_edges = graph(src, unit_of)
    unit_cyc = circles(unit_edges)
    print(f"\ncircles between units (a .c and its .h): {len(unit_cyc)}")
    for c in unit_cyc:
        print("  " + " <-> ".join(c))
    print(f"\ncircles between modules: {len(cyc)}")
    for c in cyc:
        print("  " + " <-> ".join(c))
        for m in c:
            for t in c:
                for why in edges.get(m, {}).get(t, [])[:3]:
                    print(f"      {why}")

    sizes = []
    funcs = []
    for f in files:
        with open(f, errors="replace") as fh:
            sizes.append((sum(1 for _ in fh), os.path.relpath(f, src)))
        if f.endswith(".c"):
            for name, line, n in functions(f):
                funcs.append((n, f"{os.path.relpath(f, src)}:{line} {name}()"))
    sizes.sort(reverse=True)
    funcs.sort(reverse=True)
    print(f"\nlargest files (limit {FILE_MAX} lines):")
    for n, f in sizes[:a.top]:
        print(f"  {n:6d}  {f}")
    print(f"\nlongest functions (limit {FUNCTION_MAX} lines):")
    for n, f in funcs[:a.top]:
        print(f"  {n:6d}  {f}")

    if not a.check:
        return 0
    bad = [f"circle between modules: {' <-> '.join(c)}" for c in cyc]
    bad += [f"{f}: {n} lines (limit {FILE_MAX})" for n, f in sizes if n > FILE_MAX]
    bad += [f"{f}: {n} lines (limit {FUNCTION_MAX})" for n, f in funcs if n > FUNCTION_MAX]
    if a.doc:
        rules = doc_rules(a.doc)
        if not rules:
            bad.append(f"{a.doc}: no table in a section '## Module map'")
        for m in sorted(edges):
            if m not in rules:
                bad.append(f"module {m} has no row in the module map of {a.doc}")
                continue
            for t in sorted(edges[m]):
                if t not in rules[m]:
                    bad.append(f"{m} includes {t}, which its row in {a.doc} does not allow: "
                               + "; ".join(edges[m][t][:3]))
        for m in sorted(set(rules) - set(edges)):
            bad.append(f"{a.doc} has a row for {m}, which is no module of src/")
    for b in bad:
        print("not ok: " + b)
    print(f"{0 if bad else 1} passed, {1 if bad else 0} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
