"""Remote objects across the sandbox's process boundary (standalone: standard library + codec).

Loaded by ``driver.py`` the way ``codec.py`` is, and only when a test runs in the supervisor
(a run of probes alone never imports it). Both processes of a run use it:

- the **candidate** (untrusted: it runs the program) answers the supervisor's requests with a
  :class:`Server`;
- the **supervisor** (trusted: it runs the checks and holds the expected values) reaches the
  program through a :class:`Client`: :class:`Function` stands for a program function,
  :class:`Handle` for an object of the program that stays in the candidate.

Only codec data crosses, plus four reference tags (``codec.REF_TAGS``):

- ``{"#": "h", "v": id}``: a **handle**, an object the codec cannot encode (an instance of a
  program class, a bound method, a closure), kept in the candidate's bounded table. The
  supervisor wraps it in a :class:`Handle` (one per id) whose attribute reads, calls, item
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
- ``{"#": "fn", "v": name}``: a :class:`Function` passed back as an argument: the candidate's
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
_MAX_ID = 1 << 31

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
_BINARY = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "matmul": operator.matmul, "and": operator.and_, "or": operator.or_,
    "xor": operator.xor, "lshift": operator.lshift, "rshift": operator.rshift,
}  # fmt: skip
_REFLECTED = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift"}  # fmt: skip
for _name, _fn in _BINARY.items():
    _OPS[_name] = _fn
    if _name in _REFLECTED:
        _OPS["r" + _name] = lambda obj, other, _fn=_fn: _fn(other, obj)
# The argument types whose in-place changes come back (a tuple of lists is left out:
# encoding every tuple argument twice would cost more than it serves).
_MUTABLE_ARGS = (list, dict, set, bytearray)


def _safe_str(e):
    try:
        return str(e)[:300]
    except BaseException:
        return "?"


def _error_fields(e):
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
            return '{"n":%d,%s}' % (n, _error_fields(e))

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
        items = [(i, a) for i, a in enumerate(args) if type(a) in _MUTABLE_ARGS]
        items += [(k, a) for k, a in kwargs.items() if type(a) in _MUTABLE_ARGS]
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
        if tag in ("cb", "ci") and type(v) is int and 0 < v < _MAX_ID:
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


# ---------------------------------------------------------------------------- supervisor side


class Function:
    """Stands for a function (or class) defined by the program; calling it calls it in the
    candidate. Passed as an argument, it is the candidate's own function again."""

    def __init__(self, client, name):
        self._client, self._name = client, name

    def __call__(self, *args, **kwargs):
        return self._client.request('"f":' + json.dumps(self._name), args, kwargs)

    def __repr__(self):
        return f"<remote {self._name}>"


class Client:
    """The supervisor's side of the protocol (see the module docstring).

    ``send(text)`` writes one line; ``recv()`` returns the next message as a dict or raises
    ``gone``; ``gone`` is the exception class (a BaseException) that ends the run's checks;
    ``mirror(type_name, msg)`` builds the exception a remote error raises in the check;
    ``error`` is the exception class for a result or argument that cannot cross.
    """

    def __init__(self, send, recv, gone, mirror, error):
        self._send, self._recv, self._gone, self._mirror = send, recv, gone, mirror
        self._error = error
        self._n = 0
        self._depth = 0
        self._cb_objs = {}  # callback id -> (tag, trusted object)
        self._cb_ids = {}  # id(object) -> callback id
        self._proxies = {}  # handle id -> Handle

    # -- requests

    def request(self, head, args, kwargs, op=None):
        """Send one request (``head``: its ``"f"`` or ``"h"``/``"o"`` fields) and return its
        decoded result, serving callback requests while waiting.

        Raises:
            gone: the candidate died or broke the protocol.
            StopIteration: ``op`` is "next" and the remote iterator is exhausted.
            Exception: the remote call raised (see ``mirror``), or an argument or the result
                could not be encoded / decoded.
        """
        try:
            a = codec.encode(list(args), self.ref_out)
            k = codec.encode(dict(kwargs), self.ref_out)
        except codec.EncodeError as e:
            raise self._error(f"argument not encodable: {e}") from None
        self._n += 1
        n = self._n
        self._send('{"n":%d,%s,"a":%s,"k":%s}\n' % (n, head, a, k))
        self._depth += 1
        try:
            reply = self._await()
        finally:
            self._depth -= 1
        if reply.get("n") != n:
            raise self._gone("protocol: reply to another request")
        if reply.get("stop") is True and op == "next":
            raise StopIteration
        if "v" not in reply:
            raise self._mirror(_text(reply.get("e"), 60), _text(reply.get("msg", ""), 300))
        try:
            value = codec.decode(json.dumps(reply["v"]), self.ref_in)
        except Exception:  # json.dumps can hit RecursionError; decode raises ValueError
            raise self._error("undecodable result") from None
        if "m" in reply:
            self._write_back(reply["m"], args, kwargs)
        # the items of an iterator the program returned (see Server._value)
        return iter(value) if reply.get("it") is True and isinstance(value, list) else value

    def op(self, handle, op, *args, **kwargs):
        """Apply operation ``op`` (see ``_OPS``) to the candidate's object behind ``handle``."""
        hid = object.__getattribute__(handle, "_k9_id")
        return self.request('"h":%d,"o":"%s"' % (hid, op), args, kwargs, op)

    def _await(self):
        while True:
            msg = self._recv()
            if "c" not in msg:
                return msg
            self._send(self._serve_callback(msg) + "\n")

    def _serve_callback(self, msg):
        """The reply line to a callback request (running the trusted callable or iterator).

        Raises:
            gone: the id was never given out, or is of the other kind; a malformed request.
        """
        cid, op = msg.get("c"), msg.get("o")
        entry = self._cb_objs.get(cid) if type(cid) is int else None
        if entry is None or (entry[0], op) not in (("cb", "call"), ("ci", "next")):
            raise self._gone("protocol: unknown callback")
        if self._depth > MAX_NESTING:
            return '{"r":1,"e":"RecursionError","msg":"callbacks nested too deeply"}'
        try:
            args = codec.decode(json.dumps(msg.get("a", [])), self.ref_in)
            kwargs = codec.decode(json.dumps(msg.get("k", {"#": "dict", "v": []})), self.ref_in)
        except Exception:
            raise self._gone("protocol: undecodable callback arguments") from None
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise self._gone("protocol: malformed callback arguments")
        if not all(type(key) is str for key in kwargs):
            raise self._gone("protocol: malformed callback arguments")
        try:
            if op == "next":
                try:
                    value = next(entry[1])
                except StopIteration:
                    return '{"r":1,"stop":true}'
            else:
                value = entry[1](*args, **kwargs)
            return '{"r":1,"v":' + codec.encode(value, self.ref_out) + "}"
        except self._gone:
            raise
        except BaseException as e:  # the check's callable raised (or its result is not data)
            return '{"r":1,' + _error_fields(e) + "}"

    # -- references

    def ref_out(self, x):
        """The reference tag for an argument the codec cannot encode.

        Raises:
            codec.EncodeError: neither a handle, a program function, an iterator nor a
                callable; or the callback table is full (``MAX_CALLBACKS``).
        """
        if type(x) is Handle and object.__getattribute__(x, "_k9_client") is self:
            return {"#": "h", "v": object.__getattribute__(x, "_k9_id")}
        if type(x) is Function and x._client is self:
            return {"#": "fn", "v": x._name}
        if hasattr(type(x), "__next__"):
            tag = "ci"
        elif callable(x):
            tag = "cb"
        else:
            raise codec.EncodeError(f"cannot encode value of type {type(x).__name__}")
        cid = self._cb_ids.get(id(x))
        if cid is None or self._cb_objs[cid][1] is not x:
            if len(self._cb_objs) >= MAX_CALLBACKS:
                raise codec.EncodeError("too many callbacks")
            cid = len(self._cb_objs) + 1
            self._cb_objs[cid] = (tag, x)
            self._cb_ids[id(x)] = cid
        return {"#": self._cb_objs[cid][0], "v": cid}

    def ref_in(self, tag, v):
        """The object a reference tag of the candidate stands for: a :class:`Handle` (the same
        one for the same id) or a callable / iterator this side gave out.

        Raises:
            ValueError: a callback id never given out (or of the other kind), a malformed id,
                a ``fn`` tag, or too many handles (``MAX_HANDLES``).
        """
        if type(v) is not int or not 0 < v < _MAX_ID:
            raise ValueError("malformed reference")
        if tag == "h":
            proxy = self._proxies.get(v)
            if proxy is None:
                if len(self._proxies) >= MAX_HANDLES:
                    raise ValueError("too many remote objects")
                proxy = Handle(self, v)
                self._proxies[v] = proxy
            return proxy
        entry = self._cb_objs.get(v)
        if tag in ("cb", "ci") and entry is not None and entry[0] == tag:
            return entry[1]
        raise ValueError("unknown reference")

    # -- in-place write-back

    def _write_back(self, changes, args, kwargs):
        """Put the candidate's post-call state of changed arguments into the check's objects.

        Raises:
            error: a change for no mutable argument, of another type, or undecodable.
        """
        if not isinstance(changes, list):
            raise self._error("malformed argument changes")
        for item in changes:
            if not (isinstance(item, list) and len(item) == 2):
                raise self._error("malformed argument changes")
            key, enc = item
            if type(key) is int and 0 <= key < len(args):
                target = args[key]
            elif type(key) is str and key in kwargs:
                target = kwargs[key]
            else:
                raise self._error("change of an unknown argument")
            try:
                new = codec.decode(json.dumps(enc), self.ref_in)
            except Exception:
                raise self._error("undecodable argument change") from None
            if type(new) not in _MUTABLE_ARGS or not isinstance(target, type(new)):
                raise self._error("argument change of another type")
            _merge(target, new, 0)


def _merge(old, new, depth):
    """``new``'s content put into ``old`` in place where both are the same kind of mutable
    container (recursively: a nested list the check still holds is updated too; list items
    pair by position, dict values by key); returns what should stand where ``old`` stood."""
    if depth > codec.MAX_DEPTH:
        return new
    d = depth + 1
    if type(new) is list and isinstance(old, list):
        for i in range(min(len(old), len(new))):
            new[i] = _merge(old[i], new[i], d)
        old[:] = new
        return old
    if type(new) is dict and isinstance(old, dict):
        for k, v in new.items():
            if k in old:
                new[k] = _merge(old[k], v, d)
        old.clear()
        old.update(new)
        return old
    if type(new) is set and isinstance(old, set):
        old.clear()
        old.update(new)
        return old
    if type(new) is bytearray and isinstance(old, bytearray):
        old[:] = new
        return old
    if type(new) is tuple and isinstance(old, tuple) and len(old) == len(new):
        merged = [_merge(a, b, d) for a, b in zip(old, new)]
        # A tuple cannot change in place: it stays the check's when its items were updated in
        # place (or are equal plain data; a handle is never equal to plain data).
        if all(m is a for m, a in zip(merged, old)):
            return old
        return tuple(merged)
    return new


def _text(x, n):
    return x[:n] if isinstance(x, str) else "?"


class Handle:
    """In the supervisor: an object of the program kept in the candidate (see module doc)."""

    __slots__ = ("_k9_client", "_k9_id", "__weakref__")

    def __init__(self, client, hid):
        object.__setattr__(self, "_k9_client", client)
        object.__setattr__(self, "_k9_id", hid)

    def _k9(self, op, *args, **kwargs):
        return object.__getattribute__(self, "_k9_client").op(self, op, *args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("_k9_"):
            raise AttributeError(name)
        return self._k9("getattr", name)

    def __iter__(self):
        it = self._k9("iter")  # the items of a generator, or a handle (a program iterator)
        return it if type(it) is Handle else iter(it)

    def __contains__(self, item):
        # Never sent to the program (an expected value would enter it, and a lying
        # ``__contains__`` would answer True): its items come back and are compared here.
        return any(x is item or x == item for x in self)

    __hash__ = object.__hash__  # identity: one proxy per handle id, one id per object


def _forward(name, op):
    def method(self, *args, **kwargs):
        return self._k9(op, *args, **kwargs)

    method.__name__ = name
    return method


# Dunders answered by the program object itself, as remote calls. ``bool`` among them: the
# object's own truth value, never a proxy's default True (``assert candidate(x)`` must not pass
# for any object returned).
_FORWARDED = ("setattr", "delattr", "call", "repr", "str", "bool", "len", "int", "float",
              "index", "getitem", "setitem", "delitem", "next", "neg", "pos", "abs", "invert")
for _op in _FORWARDED:
    setattr(Handle, f"__{_op}__", _forward(f"__{_op}__", _op))


def _same_client(a, b):
    return type(b) is Handle and object.__getattribute__(
        a, "_k9_client"
    ) is object.__getattribute__(b, "_k9_client")


def _binary(name):
    def method(self, other):
        if not _same_client(self, other):
            return NotImplemented  # plain data never meets the program's operators
        return self._k9(name, other)

    method.__name__ = f"__{name}__"
    return method


for _name in _BINARY:
    setattr(Handle, f"__{_name}__", _binary(_name))
    if _name in _REFLECTED:
        setattr(Handle, f"__r{_name}__", _binary("r" + _name))
