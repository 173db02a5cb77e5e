"""Remote objects across the sandbox's process boundary (standalone: standard library + codec).

Loaded by ``driver.py`` the way ``codec.py`` is, and only when a test runs in the supervisor
(a run of probes alone never imports it). Both processes of a run use the protocol:

- the **candidate** (untrusted: it runs the program) answers the supervisor's requests with a
  :class:`Server` (this file);
- the **supervisor** (trusted: it runs the checks and holds the expected values) reaches the
  program through a ``Client`` (``remote_client.py``): a ``Function`` stands for a program
  function, a ``Handle`` for an object of the program that stays in the candidate.

Only codec data crosses, plus four reference tags (``codec.REF_TAGS``):

- ``{"#": "h", "v": id}``: a **handle**, an object the codec cannot encode (an instance of a
  program class, a bound method, a closure), kept in the candidate's bounded table. The
  supervisor wraps it in a ``Handle`` (one per id) whose attribute reads, calls, item
  access, ``len``, ``str``, truth value, iteration and arithmetic / comparisons *with another
  handle* are requests answered with plain data or further handles. A comparison or arithmetic
  with anything else is never forwarded (``==`` is False, ``<`` a TypeError): a program object
  whose ``__eq__`` always says True must not pass ``assert f(x) == 5``, and an expected value
  must not enter the candidate through an operator. ``in`` iterates the handle (its items come
  back as data and are compared here) for the same reason. Hashes are the proxy's identity.
- ``{"#": "cb" | "ci", "v": id}``: a **callback**, a callable / iterator of the check passed as
  an argument (``key=len``, ``lambda x: x * x``, a generator), kept in the supervisor's bounded
  table. In the candidate it is a proxy whose call (``next``) sends a callback request; the
  supervisor runs the trusted object on the decoded plain-data arguments and replies with data
  (or a mirrored builtin exception; ``StopIteration`` of a ``next`` is carried explicitly).
- ``{"#": "fn", "v": name}``: a ``Function`` passed back as an argument: the candidate's
  own function of that name.

Messages (one JSON line each): the supervisor sends requests ``{"n", "f" | "h"+"o", "a", "k"}``
(call a function by name / apply operation ``o`` to handle ``h``; ``n`` numbers them) and
replies to callbacks ``{"r": 1, "v" | "e"+"msg" | "stop"}``; the candidate sends replies
``{"n", "v" [, "it"] [, "m"] | "e"+"msg" | "stop"}`` and callback requests ``{"c", "o", "a", "k"}``.
Both wait loops serve nested requests (a callback may call the program again), synchronously;
the supervisor bounds the nesting at ``MAX_NESTING``. ``"m"`` carries the post-call state of
mutable arguments the call changed (``[[index or keyword, value], ...]``); the supervisor
writes it back into the check's own objects in place (recursively where the structure
matches), so ``l = [3, 1, 2]; candidate(l); assert l == [1, 2, 3]`` works.

A message that breaks the protocol (a callback id never given out, or of the wrong kind, a
reply numbered for another request, an undecodable payload) ends the run's remaining checks
(``gone``), as a dead candidate does.
"""

import builtins
import json
import operator
import os

try:
    import codec  # in the sandbox: the sibling file, as driver.py loads it
except ImportError:  # imported on the host (unit tests): the package's copy
    from rlvr.sandbox import codec

MAX_HANDLES = 50_000  # objects one run's candidate keeps for the supervisor (and proxies there)
MAX_CALLBACKS = 10_000  # callables / iterators of the checks one run hands to the candidate
MAX_NESTING = 64  # requests outstanding at once (callback ping-pong between the two sides)
MAX_ITERATED = 100_000  # items of an iterator sent back as a list (see Server._value)
MAX_ID = 1 << 31

# Handle operations: name -> how the candidate applies it (``obj`` first).
_OPS = {
    "getattr": getattr,
    "setattr": setattr,
    "delattr": delattr,
    "call": lambda obj, /, *a, **k: obj(*a, **k),
    "len": len,
    "bool": bool,
    "str": str,
    "repr": repr,
    "int": int,
    "float": float,
    "index": operator.index,
    "getitem": operator.getitem,
    "setitem": operator.setitem,
    "delitem": operator.delitem,
    "iter": iter,
    "neg": operator.neg,
    "pos": operator.pos,
    "abs": abs,
    "invert": operator.invert,
}
# Binary operators (forwarded only between two handles): name -> operator function.
BINARY = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "matmul": operator.matmul, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift,
}  # fmt: skip
REFLECTED = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift"}  # fmt: skip
for _name, _fn in BINARY.items():
    _OPS[_name] = _fn
    if _name in REFLECTED:
        _OPS["r" + _name] = lambda obj, other, _fn=_fn: _fn(other, obj)
# The argument types whose in-place changes come back (a tuple of lists is left out:
# encoding every tuple argument twice would cost more than it serves).
MUTABLE_ARGS = (list, dict, set, bytearray)


def _safe_str(e):
    try:
        return str(e)[:300]
    except BaseException:
        return "?"


def error_fields(e):
    return json.dumps({"e": type(e).__name__, "msg": _safe_str(e)})[1:-1]


# ----------------------------------------------------------------------------- candidate side


class _Callback:
    """In the candidate: a callable of the check; calling it asks the supervisor to."""

    __slots__ = ("_server", "_id")

    def __init__(self, server, cid):
        self._server, self._id = server, cid

    def __call__(self, *args, **kwargs):
        return self._server.callback(self._id, "call", args, kwargs)

    def __repr__(self):
        return f"<callback {self._id}>"


class _CallbackIter(_Callback):
    """In the candidate: an iterator of the check; each ``next`` is a callback request."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        raise TypeError("'iterator' object is not callable")

    def __iter__(self):
        return self

    def __next__(self):
        return self._server.callback(self._id, "next", (), {})


class Server:
    """The candidate's side: answers requests, keeps the handle table, sends callbacks.

    ``ns``: the program's namespace (functions called by name); ``send(text)`` writes one
    message line; ``recv()`` returns the next message (a dict) or None at EOF.
    """

    def __init__(self, ns, send, recv):
        self.ns, self.send, self.recv = ns, send, recv
        self.objs = {}  # handle id -> object (kept alive, so ids of live objects stay unique)
        self.hids = {}  # id(object) -> handle id: the same object is always the same handle
        self.cbs = {}  # (tag, callback id) -> proxy: the same callback is the same proxy

    def serve(self, first=None):
        """Answer requests until EOF (then exit the process)."""
        msg = first
        while True:
            if msg is None:
                msg = self.recv()
            if msg is None or "r" in msg:  # EOF, or a reply with no callback outstanding
                os._exit(0)
            self.send(self.answer(msg))
            msg = None

    def answer(self, req):
        """The reply line (without newline) to one request of the supervisor."""
        n = req.get("n") if type(req.get("n")) is int else 0
        try:
            return '{"n":%d,%s}' % (n, self._answer(req))
        except BaseException as e:  # whatever the program raised: mirrored by type name
            return '{"n":%d,%s}' % (n, error_fields(e))

    def _answer(self, req):
        args = codec.decode(json.dumps(req.get("a", [])), self.ref_in)
        kwargs = codec.decode(json.dumps(req.get("k", {"#": "dict", "v": []})), self.ref_in)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("malformed request")
        if "f" in req:
            target, op = self.ns[req["f"]], "call"
        else:
            target, op = self.objs[req["h"]], req["o"]
        if op == "next":
            try:
                return '"v":' + codec.encode(next(target), self.ref_out)
            except StopIteration:
                return '"stop":true'
        fn = _OPS[op]
        before = self._snapshot(args, kwargs)
        value = fn(target, *args, **kwargs)
        out = self._value(value)
        changed = self._changes(before)
        return out + (',"m":[' + ",".join(changed) + "]" if changed else "")

    def _snapshot(self, args, kwargs):
        # Only mutable builtin containers can change in place under the call; their encodings
        # before the call are compared after it.
        items = [(i, a) for i, a in enumerate(args) if type(a) in MUTABLE_ARGS]
        items += [(k, a) for k, a in kwargs.items() if type(a) in MUTABLE_ARGS]
        return [(key, a, codec.encode(a, self.ref_out)) for key, a in items]

    def _changes(self, before):
        out = []
        for key, a, text in before:
            try:
                now = codec.encode(a, self.ref_out)
            except codec.EncodeError:
                continue  # grown beyond the codec's bounds: the check keeps its old state
            if now != text:
                out.append("[" + json.dumps(key) + "," + now + "]")
        return out

    def _value(self, value):
        """The ``"v"`` field for ``value``: plain data, handles for what the codec cannot carry;
        a builtin iterator the program made (a generator, ``map``) is run to the end here (at
        most ``MAX_ITERATED`` items) and sent as its items, flagged ``"it"``: the check gets an
        iterator over them. An iterator of a program class stays a handle (``next`` on it).

        Raises:
            codec.EncodeError: too many items, handles, or too large a value.
        """
        cls = type(value)
        if (
            hasattr(cls, "__next__")
            and hasattr(cls, "__iter__")
            and getattr(cls, "__module__", None) != "__main__"
            and not isinstance(value, _Callback)
        ):
            items = []
            for item in value:
                if len(items) >= MAX_ITERATED:
                    raise codec.EncodeError("returned iterator too long")
                items.append(item)
            return '"v":' + codec.encode(items, self.ref_out) + ',"it":true'
        return '"v":' + codec.encode(value, self.ref_out)

    def ref_out(self, x):
        """The reference tag for a value the codec cannot encode (a callback proxy's own id, or
        a handle, new or known).

        Raises:
            codec.EncodeError: the handle table is full (``MAX_HANDLES``).
        """
        if type(x) in (_Callback, _CallbackIter):
            return {"#": "cb" if type(x) is _Callback else "ci", "v": x._id}
        hid = self.hids.get(id(x))
        if hid is None:
            if len(self.objs) >= MAX_HANDLES:
                raise codec.EncodeError("too many remote objects")
            hid = len(self.objs) + 1
            self.objs[hid] = x
            self.hids[id(x)] = hid
        return {"#": "h", "v": hid}

    def ref_in(self, tag, v):
        """The object a reference tag of the supervisor stands for.

        Raises:
            ValueError: an unknown handle or function, a malformed id.
        """
        if tag == "h" and type(v) is int and v in self.objs:
            return self.objs[v]
        if tag in ("cb", "ci") and type(v) is int and 0 < v < MAX_ID:
            proxy = self.cbs.get((tag, v))
            if proxy is None:
                proxy = (_Callback if tag == "cb" else _CallbackIter)(self, v)
                self.cbs[(tag, v)] = proxy
            return proxy
        if tag == "fn" and type(v) is str and callable(self.ns.get(v)):
            return self.ns[v]
        raise ValueError("unknown reference")

    def callback(self, cid, op, args, kwargs):
        """Run the supervisor's callable (``op`` "call") or iterator (``op`` "next") ``cid``,
        serving nested requests while waiting.

        Raises:
            StopIteration: the iterator is exhausted.
            Exception: the callback raised (mirrored by builtin type name, else RuntimeError).
        """
        self.send(
            '{"c":%d,"o":"%s","a":%s,"k":%s}'
            % (cid, op, codec.encode(list(args), self.ref_out),
               codec.encode(dict(kwargs), self.ref_out))
        )  # fmt: skip
        while True:
            msg = self.recv()
            if msg is None:
                os._exit(0)
            if "r" in msg:
                break
            self.send(self.answer(msg))  # a nested request (the callback called the program)
        if msg.get("stop") is True:
            raise StopIteration
        if "v" in msg:
            return codec.decode(json.dumps(msg["v"]), self.ref_in)
        base = getattr(builtins, str(msg.get("e")), None)
        text = str(msg.get("msg", ""))
        if not (isinstance(base, type) and issubclass(base, BaseException)):
            base = RuntimeError
        try:
            err = base(text)
        except Exception:  # a type whose constructor wants more (UnicodeDecodeError, ...)
            err = RuntimeError(f"{base.__name__}: {text}")
        raise err
