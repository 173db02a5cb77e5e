"""The supervisor's side of the sandbox's remote protocol (standalone: standard library +
``codec.py`` and ``remote.py``, loaded the way ``driver.py`` loads them).

The protocol itself (messages, reference tags, bounds) is described in ``remote.py``, which also
holds the candidate's side. Here: :class:`Client` (requests, callbacks served while waiting,
reference tags, in-place write-back of changed arguments), :class:`Function` (a program
function, called by name) and :class:`Handle` (an object of the program kept in the candidate).

Neither :class:`Function` nor :class:`Handle` gives the check anything of the program but what a
remote call answers: plain data or further handles. A :class:`Function` has no attributes of the
program (a program class bound to a name a check reads, ``class math: isclose = ...``, is a
Function there, and ``math.isclose`` raises AttributeError); a :class:`Handle` never equals
plain data and never receives it through an operator.
"""

import json

try:  # in the sandbox: the sibling files, as driver.py loads them
    import codec
    import remote
except ImportError:  # imported on the host (unit tests): the package's copies
    from rlvr.sandbox import codec, remote


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
        if self._depth > remote.MAX_NESTING:
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
            return '{"r":1,' + remote.error_fields(e) + "}"

    # -- references

    def ref_out(self, x):
        """The reference tag for an argument the codec cannot encode.

        Raises:
            codec.EncodeError: neither a handle, a program function, an iterator nor a
                callable; or the callback table is full (``remote.MAX_CALLBACKS``).
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
            if len(self._cb_objs) >= remote.MAX_CALLBACKS:
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
                a ``fn`` tag, or too many handles (``remote.MAX_HANDLES``).
        """
        if type(v) is not int or not 0 < v < remote.MAX_ID:
            raise ValueError("malformed reference")
        if tag == "h":
            proxy = self._proxies.get(v)
            if proxy is None:
                if len(self._proxies) >= remote.MAX_HANDLES:
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
            if type(new) not in remote.MUTABLE_ARGS or not isinstance(target, type(new)):
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


for _name in remote.BINARY:
    setattr(Handle, f"__{_name}__", _binary(_name))
    if _name in remote.REFLECTED:
        setattr(Handle, f"__r{_name}__", _binary("r" + _name))
