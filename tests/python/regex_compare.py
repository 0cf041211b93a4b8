#!/usr/bin/python3
"""Random Python-`re` patterns and module names, answered by this Python's `re`, for comparison with
peft-bridge's engine (src/text/python_regex*).

Writes a vectors file that tests/native/python_regex_vectors_test.cc replays:
    P <hex pattern> <ok|err> <flags>      flags: U = holds a construct peft-bridge refuses on purpose
                                                 (unless a class swallowed it), G = group spans are not
                                                 compared (see Gen.quantified), - = none
    N <hex name> <fullmatch 0|1> <match 0|1> <groups>
                                          groups: - when re.match finds nothing, else the byte spans of
                                          groups 0..n as b:e (x for a group that did not take part)
Usage:
    tests/python/regex_compare.py OUT [--patterns N] [--names K] [--seed S]
The committed tests/native/data/python_regex_vectors.txt is `--patterns 3000 --names 8 --seed 1`; the
full comparison is `--patterns 80000 --names 10 --seed 2` into /tmp, replayed with
PB_REGEX_VECTORS=/tmp/file build/native/tests/pb_tests --gtest_filter='PythonRegexVectors.*'.
Deterministic for a given seed and Python version (3.11 here).
"""
import argparse
import random
import re
import sys
import warnings

LITERALS = ["a", "a", "b", "b", "c", "0", "1", "_", "-", "K", "i", "s", "\\.", "\\-", "\\_", "\\n", "\\t",
            "\\x61", "\\x2e", "\\0", "\\u0062", "{", "}", "]", ",", " ", "/"]
NAME_CHARS = (["a"] * 6 + ["b"] * 4 + ["."] * 4 + ["0"] * 2 + ["c", "1", "9", "_", "-", "K", "k", "i", "s", "S",
              "I", " ", "\n", "\t", "{", "}", "]", ",", "\u00e9", "\u0130", "\u0131", "\u017f", "\u212a",
              "\u00b9", "\u00b5", "\u2028", "\x1c", "\u00d7", "\u4e2d"])
CLASS_ITEMS = ["a", "b", "c", "0", "9", ".", "_", "-", "K", "i", "s", "]", "^", "\\d", "\\w", "\\s", "\\D", "\\W",
               "\\S", "\\n", "\\-", "\\]", "\\b", "a-c", "0-9", "A-Z", "a-z", "Z-a", "\\x41-\\x5a", " ", "{"]


class Gen:
    """Builds a random pattern; each piece is (text, nullable, has_group) so that the flags can be set."""

    def __init__(self, rng):
        self.rng = rng
        self.groups = 0
        self.unsupported = False
        self.no_groups = False  # group spans peft-bridge does not promise to reproduce (see quantified)

    def atom(self, depth):
        r = self.rng.random()
        if r < 0.40:
            return self.rng.choice(LITERALS), False, False
        if r < 0.50:
            return ".", False, False
        if r < 0.62:
            return self.char_class(), False, False
        if r < 0.68:
            return self.rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]), False, False
        if r < 0.74:
            return self.rng.choice(["^", "$", "\\b", "\\B"]), True, False
        if r < 0.92 and depth < 4:
            kind = self.rng.random()
            body, nullable, has_group = self.alternation(depth + 1)
            if kind < 0.5:
                self.groups += 1
                return "(" + body + ")", nullable, True
            if kind < 0.8:
                return "(?:" + body + ")", nullable, has_group
            self.no_groups = True  # groups inside a lookahead are not captured
            return ("(?=" if kind < 0.9 else "(?!") + body + ")", True, has_group
        if r < 0.96:
            return self.invalid_or_refused(), None, False
        return self.rng.choice(["a", "b", "."]), False, False

    def invalid_or_refused(self):
        r = self.rng.random()
        if r < 0.5:  # malformed: Python must reject these and so must we
            return self.rng.choice(["(", ")", "[", "*", "?", "\\", "[z-a]", "a**", "a{3,2}", "[\\d-z]", "\\q",
                                    "(?", "(?x", "\\x4"])
        # Constructs peft-bridge refuses. Inside a class that swallows them they are literals, so the
        # replay only requires a refusal to be one of these, not that every U pattern be refused.
        self.unsupported = True
        if r < 0.6 and self.groups:
            return "\\1"
        return self.rng.choice(["(?P<n>a)", "(?<=a)", "(?<!a)", "(?#c)", "a*+", "a++", "(?s)", "(?>a)", "\\A", "\\Z",
                                "(?i:a)", "\\N{DIGIT ONE}", "(a)(?(1)b|c)"])

    def char_class(self):
        items = "".join(self.rng.choice(CLASS_ITEMS) for _ in range(self.rng.randint(1, 3)))
        return "[" + ("^" if self.rng.random() < 0.3 else "") + items + "]"

    def quantified(self, depth):
        a, nullable, has_group = self.atom(depth)
        if nullable is None:  # a malformed piece stays as it is (a quantifier could make it possessive)
            return a, False, has_group
        if self.rng.random() < 0.55:
            return a, nullable, has_group
        q = self.rng.choice(["*", "+", "?", "{2}", "{1,}", "{,2}", "{0,3}", "{1,2}", "{0}", "{2,3}"])
        if q not in ("?", "{0}") and nullable and has_group:
            # A group in a repeated body that can match the empty string: sre records the last, empty
            # iteration; a Pike VM keeps the last non-empty one. Matches agree; the group spans may not.
            self.no_groups = True
        if self.rng.random() < 0.25:
            q += "?"
        return a + q, nullable or q[0] in "*?" or q.startswith("{0") or q.startswith("{,"), has_group

    def sequence(self, depth):
        parts = [self.quantified(depth) for _ in range(self.rng.randint(0, 4))]
        return "".join(p[0] for p in parts), all(p[1] for p in parts), any(p[2] for p in parts)

    def alternation(self, depth):
        alts = [self.sequence(depth)]
        while self.rng.random() < 0.25:
            alts.append(self.sequence(depth))
        return "|".join(a[0] for a in alts), any(a[1] for a in alts), any(a[2] for a in alts)

    def pattern(self):
        p = self.alternation(0)[0]
        if self.rng.random() < 0.1:
            p = "(?i)" + p
        r = self.rng.random()  # PEFT's own wrappings around user strings
        if r < 0.08:
            p = "(.*\\.)?(" + p + ")$"
        elif r < 0.12:
            p = "(^|.*\\.)" + p + "($|\\..*)"
        return p


def name(rng):
    return "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(0, 10)))


def byte_offset(text, i):
    return len(text[:i].encode("utf-8"))


def spans(m, text):
    out = []
    for g in range(m.re.groups + 1):
        b, e = m.span(g)
        out.append("x" if b < 0 else f"{byte_offset(text, b)}:{byte_offset(text, e)}")
    return ",".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--patterns", type=int, default=3000)
    ap.add_argument("--names", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # FutureWarning for "[[" and the like
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="ascii") as f:
        for _ in range(args.patterns):
            g = Gen(rng)
            p = g.pattern()
            try:
                compiled = re.compile(p)
                status = "ok"
            except Exception:  # re.error, OverflowError, RecursionError: all a rejection
                compiled, status = None, "err"
            flags = ("U" if g.unsupported else "") + ("G" if g.no_groups else "")
            f.write(f"P {p.encode('utf-8').hex() or '-'} {status} {flags or '-'}\n")
            if compiled is None:
                continue
            words = [name(rng) for _ in range(args.names)]
            for w in words:
                full = compiled.fullmatch(w) is not None
                m = compiled.match(w)
                f.write(f"N {w.encode('utf-8').hex() or '-'} {int(full)} {int(m is not None)} "
                        f"{spans(m, w) if m else '-'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
