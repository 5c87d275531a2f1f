#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The HTTP request parser against h11, an independent HTTP/1.1 implementation.

    tests/http/h11_parser_diff.py PROBE [SEED]

PROBE is the http-probe program (tests/http/http_probe.c). Every request below, and 600
generated ones, goes through both. They must agree: both accept, with the same method,
target, version and fields; or both refuse. Where iomux is stricter than h11 on purpose,
the case names the difference, and the test checks that it is exactly that one (so that a
change on either side shows). Exit 0: agreement; 1: a difference, printed; 77: no h11.
"""
import random
import subprocess
import sys

try:
    import h11
except ImportError:
    print("SKIP: python3-h11 is not installed (scripts/install-deps test installs it)")
    sys.exit(77)

PROBE = sys.argv[1]
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 20261125


def ours(data):
    out = subprocess.run([PROBE], input=data, capture_output=True, check=True).stdout.decode()
    lines = out.splitlines()
    word = lines[0].split()
    if word[0] == "bad":
        return ("bad", int(word[1]))
    if word[0] == "more":
        return ("more",)
    unhex = lambda s: b"" if s == "-" else bytes.fromhex(s)
    fields = []
    for line in lines[1:]:
        _, n, v = line.split()
        fields.append((unhex(n).lower(), unhex(v)))
    version = {"10": b"1.0", "11": b"1.1"}[word[4]]
    return ("ok", unhex(word[2]), unhex(word[3]), version, fields)


def theirs(data):
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        ev = conn.next_event()
    except h11.RemoteProtocolError as e:
        return ("bad", e.error_status_hint)
    if ev is h11.NEED_DATA:
        return ("more",)
    return ("ok", ev.method, ev.target, ev.http_version,
            [(n.lower(), v) for n, v in ev.headers.raw_items()])


def h(*lines, end=b"\r\n"):
    return b"".join(l + end for l in lines) + end


# (request, None) must agree; (request, (ours, theirs, why)) is a known difference: our
# answer and h11's, as ("bad", status) or "ok".
CASES = [
    (h(b"GET / HTTP/1.1", b"Host: a"), None),
    (h(b"GET /a/b?c=d&e=%20 HTTP/1.1", b"Host: example.com:8080", b"Accept: */*",
       b"X-Empty:", b"X-Sp:   padded   "), None),
    (h(b"POST /up HTTP/1.1", b"Host: a", b"Content-Length: 5"), None),
    (h(b"POST /up HTTP/1.1", b"Host: a", b"Transfer-Encoding: chunked"), None),
    (h(b"GET / HTTP/1.0"), None),
    (h(b"GET / HTTP/1.0", b"Connection: keep-alive"), None),
    (h(b"OPTIONS * HTTP/1.1", b"Host: a"), None),
    (h(b"CONNECT a.example:443 HTTP/1.1", b"Host: a.example:443"), None),
    (h(b"GET http://a.example/x HTTP/1.1", b"Host: a.example"), None),
    (h(b"GET / HTTP/1.1", b"Host: a", end=b"\n"), None),
    (h(b"GET / HTTP/1.1", b"Host: a", b"X-Obs: caf\xc3\xa9"), None),
    (h(b"GET / HTTP/1.1"), None),                                   # no Host
    (h(b"GET / HTTP/1.1", b"Host: a", b"Host: b"), None),           # two
    (h(b"GET / HTTP/1.1", b"Host: a", b"X : v"), None),             # space before colon
    (h(b"GET / HTTP/1.1", b"Host: a", b"X(y): v"), None),           # not a token
    (h(b"GET / HTTP/1.1", b"Host: a", b": v"), None),
    (h(b"GET / HTTP/1.1", b"Host: a", b"NoColon"), None),
    (h(b"GET / HTTP/1.1", b"Host: a", b"X: a\x01b"),
     (("bad", 400), "ok", "a control byte in a value: RFC 9110 5.5 calls it invalid; h11 keeps it")),
    (h(b"GET /\xc3\xa9 HTTP/1.1", b"Host: a"), None),
    (h(b"GET /a b HTTP/1.1", b"Host: a"), None),
    (h(b"G@T / HTTP/1.1", b"Host: a"), None),
    (h(b"GET / HTTP/1", b"Host: a"), None),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Content-Length: 3x"), None),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Content-Length: 3", b"Content-Length: 4"), None),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Transfer-Encoding: gzip, chunked"), None),
    (h(b"GET / HTTP/1.1", b"Host: a", b"X: a", b"  folded"),
     (("bad", 400), "ok", "obs-fold: RFC 9112 5.2 lets a server refuse it; h11 unfolds it")),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Content-Length: 3", b"Transfer-Encoding: chunked"),
     (("bad", 400), "ok", "both framings: RFC 9112 6.3 allows refusing; h11 takes chunked")),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Transfer-Encoding: chunked, chunked"),
     (("bad", 400), ("bad", 501), "chunked twice is broken framing here, an unknown coding to h11")),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Transfer-Encoding: gzip"),
     (("bad", 400), ("bad", 501), "chunked not last: RFC 9112 6.3 says 400")),
    (h(b"POST / HTTP/1.0", b"Transfer-Encoding: chunked"),
     (("bad", 400), "ok", "RFC 9112 6.1: HTTP/1.0 with Transfer-Encoding is faulty framing")),
    (h(b"GET / HTTP/2.0", b"Host: a"),
     (("bad", 505), "ok", "h11 reads any version's request line")),
    (h(b"GET / HTTP/1.1", b"Host: a", b"Expect: nope"),
     (("bad", 417), "ok", "RFC 9110 10.1.1: 417 for an expectation not met")),
    (b"\r\n" + h(b"GET / HTTP/1.1", b"Host: a"),
     ("ok", ("bad", 400), "RFC 9112 2.2: a server SHOULD ignore empty lines before the request")),
    (h(b"POST / HTTP/1.1", b"Host: a", b"Content-Length: 7, 7"),
     ("ok", "ok", "")),
]

TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
PCHAR = bytes(range(0x21, 0x7F))
VCHAR = bytes(range(0x21, 0x7F)) + b" \t"


def generated(rng):
    """A valid request with random method, target, fields."""
    method = bytes(rng.choice(TCHAR) for _ in range(rng.randint(1, 10)))
    target = b"/" + bytes(rng.choice(PCHAR) for _ in range(rng.randint(0, 60)))
    lines = [method + b" " + target + b" HTTP/1." + rng.choice([b"0", b"1"])]
    lines.append(b"Host: " + bytes(rng.choice(TCHAR) for _ in range(rng.randint(1, 20))))
    for _ in range(rng.randint(0, 12)):
        name = bytes(rng.choice(TCHAR) for _ in range(rng.randint(1, 16)))
        if name.lower() in (b"host", b"content-length", b"transfer-encoding", b"expect",
                            b"connection"):
            continue
        value = bytes(rng.choice(VCHAR) for _ in range(rng.randint(0, 40))).strip(b" \t")
        lines.append(name + b":" + b" " * rng.randint(0, 2) + value)
    return h(*lines, end=rng.choice([b"\r\n", b"\n"]))


def same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "ok":
        return a[1:] == b[1:]
    return a == b


def main():
    failures = 0
    for data, known in CASES:
        a, b = ours(data), theirs(data)
        if known is None:
            ok = same(a, b)
            why = "they differ"
        else:
            want_a, want_b, reason = known
            ok = (a[0] == want_a if isinstance(want_a, str) else a == want_a) and \
                 (b[0] == want_b if isinstance(want_b, str) else b == want_b)
            why = "not the known difference (%s)" % reason
        if not ok:
            failures += 1
            print("DIFF %r\n  iomux: %r\n  h11:   %r\n  %s" % (data, a, b, why))
    rng = random.Random(SEED)
    for i in range(600):
        data = generated(rng)
        a, b = ours(data), theirs(data)
        if not (a[0] == "ok" and same(a, b)):
            failures += 1
            print("DIFF (generated %d, seed %d) %r\n  iomux: %r\n  h11:   %r" % (i, SEED, data, a, b))
    print("%d listed requests and 600 generated ones: %d differences" % (len(CASES), failures))
    return 1 if failures else 0


sys.exit(main())
