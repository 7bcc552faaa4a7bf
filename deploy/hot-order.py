#!/usr/bin/env python3
"""The functions of one binary that a callgrind run executed, in the binary's address order.

    hot-order.py CALLGRIND_OUT BINARY [PREVIOUS_ORDER]

Reads a callgrind output file (`valgrind --tool=callgrind --demangle=no --dump-instr=no`) and prints the mangled
name of every function of BINARY that ran, one a line: the input for lld's --symbol-ordering-file. With
PREVIOUS_ORDER, the functions listed there that BINARY still has are kept too: one profile misses some rarely run
code, and a function missing from the order costs a 64 KB run of cold code, one listed needlessly only its size.
Address order keeps the functions of one source file next to each other, as the compiler laid them out. A summary
goes to stderr.
"""
import os
import re
import subprocess
import sys

DEFINITION = re.compile(r"^(c?ob|c?fn)=\((\d+)\)(?: (.*))?$")


def executed(callgrind_out, binary):
    """Names of the functions of `binary` that appear in the profile (with a cost, or as a callee)."""
    objects, functions, names = {}, {}, set()
    binary = os.path.realpath(binary)
    current_object = callee_object = None
    with open(callgrind_out, errors="replace") as lines:
        for line in lines:
            match = DEFINITION.match(line.rstrip("\n"))
            if not match:
                continue
            kind, number, name = match.groups()
            if kind in ("ob", "cob"):
                # Names are compressed: "(n) name" the first time, "(n)" after.
                if name is not None:
                    objects[number] = os.path.realpath(name) if name.startswith("/") else name
                if kind == "ob":
                    current_object = objects.get(number)
                else:
                    callee_object = objects.get(number)
                continue
            if name is not None:
                # callgrind names a recursive activation `name'2`; the symbol is `name`.
                functions[number] = re.sub(r"'\d+$", "", name)
            # A cfn's object is the cob just before it, else the current ob.
            owner = current_object if kind == "fn" else (callee_object or current_object)
            callee_object = None
            if owner == binary and number in functions:
                names.add(functions[number])
    return names


def addresses(binary):
    """Function symbols of `binary` → (address, size), from its symbol table."""
    out = subprocess.run(["nm", "-S", "--defined-only", "--no-demangle", binary],
                         capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        fields = line.split(" ", 3)
        if len(fields) == 4 and fields[2] in ("T", "t", "W", "w"):
            table.setdefault(fields[3], (int(fields[0], 16), int(fields[1], 16)))
    return table


def main():
    callgrind_out, binary = sys.argv[1], sys.argv[2]
    ran = executed(callgrind_out, binary)
    table = addresses(binary)
    kept = set()
    if len(sys.argv) > 3 and os.path.exists(sys.argv[3]):
        with open(sys.argv[3]) as previous:
            kept = {line.strip() for line in previous if line.strip() and not line.startswith("#")} - ran
    known = sorted((table[name][0], name) for name in ran | kept if name in table)
    for _, name in known:
        print(name)
    hot = sum(table[name][1] for _, name in known)
    total = sum(size for _, size in table.values())
    print(f"{len(known)} functions ({hot / 1048576:.1f} MB of {total / 1048576:.1f} MB of functions): "
          f"{sum(name in table for name in ran)} ran, {sum(name in table for name in kept)} kept from the previous order; "
          f"{sum(name not in table for name in ran)} names that ran are not in the symbol table", file=sys.stderr)


if __name__ == "__main__":
    main()
