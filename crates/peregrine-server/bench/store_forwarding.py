#!/usr/bin/env python3
"""Lists likely store-to-load forwarding stalls in a function of a release binary.

A 16-byte load (`movdqu`, `movups`, `movdqa`, `movaps`) from the stack that reads bytes written
shortly before by narrower stores (8, 4, 2 or 1 byte `mov`s into the same 16 bytes) cannot take
its data from the store buffer: the load waits until the stores reach the cache, about 10-15
cycles. LLVM emits this when a small struct or enum is built field by field and then moved whole
(an `Option<Body>` set to `None`, a `Vec` taken from a thread-local on two paths). The per-request
cost does not show in instruction counts (`instructions.sh`), only in `perf annotate` as samples
piled up on the instruction after the load; this script finds the pattern statically, so a fix can
be checked without a profile (docs/performance.md, "Fifth pass").

It is a heuristic over straight-line text: it does not follow branches (a hit can be on a path
not taken per request) and it looks back only WINDOW instructions. Confirm a hit with
`perf annotate` before changing code for it.

usage: bench/store_forwarding.py BINARY SYMBOL_SUBSTRING [WINDOW]
  e.g. bench/store_forwarding.py target/release/examples/hello 'conn::busy::{{closure}}>'
Exit status 0; one line per (load, store) pair found, after the function's header line.
"""

import re
import subprocess
import sys

WIDE_LOADS = ("movdqu", "movdqa", "movups", "movaps")
NARROW_STORES = ("mov", "movq", "movl", "movw", "movb")
STACK = r"(?:0x([0-9a-f]+))?\((%r[sb]p)\)"


def functions(binary):
    """(header, [(address, mnemonic, operands)]) per function of `binary`'s disassembly."""
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", binary],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for block in re.split(r"\n(?=[0-9a-f]+ <)", text):
        header, _, body = block.partition("\n")
        code = []
        for line in body.split("\n"):
            m = re.match(r"\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
            if m:
                code.append(m.groups())
        yield header, code


def stack_load(code, i, leas):
    """(offset, base register) of a 16-byte stack load at `code[i]`, or None."""
    _, op, args = code[i]
    if op not in WIDE_LOADS:
        return None
    m = re.match(STACK + r",%xmm\d+$", args)
    if m:
        return int(m.group(1) or "0", 16), m.group(2)
    # `lea off(%rsp),%reg` then `movdqu (%reg),%xmm`: the same load through a register.
    m = re.match(r"\((%r\w+)\),%xmm\d+$", args)
    if m and m.group(1) in leas and i - leas[m.group(1)][2] < 6:
        off, base, _ = leas[m.group(1)]
        return off, base
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, symbol = sys.argv[1], sys.argv[2]
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    for header, code in functions(binary):
        if symbol not in header:
            continue
        print(header, len(code), "instructions")
        leas = {}
        for i, (addr, op, args) in enumerate(code):
            m = re.match(STACK + r",(%r\w+)$", args)
            if op == "lea" and m:
                leas[m.group(3)] = (int(m.group(1) or "0", 16), m.group(2), i)
            load = stack_load(code, i, leas)
            if load is None:
                continue
            off, base = load
            for j in range(max(0, i - window), i):
                addr2, op2, args2 = code[j]
                m2 = re.match(r"(%\w+|\$[-0-9a-fx]+)," + STACK + "$", args2)
                if op2 in NARROW_STORES and m2 and m2.group(3) == base:
                    at = int(m2.group(2) or "0", 16)
                    if off <= at < off + 16:
                        print(
                            f"  load {addr} {op} {args}  <- store {addr2} {op2} {args2} ({i - j} back)"
                        )


if __name__ == "__main__":
    main()
