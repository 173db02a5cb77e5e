"""The remote protocol (``rlvr.sandbox.remote``, ``rlvr.sandbox.remote_client``) without a
sandbox: a supervisor ``Client`` and a candidate ``Server`` joined by in-memory queues, and a
``Client`` facing forged messages.
"""

from __future__ import annotations

import json
import queue
import threading

import pytest

from rlvr.sandbox import codec, remote, remote_client


class Gone(BaseException):
    pass


class Err(Exception):
    pass


def _mirror(name, msg):
    # as the driver's: an exception named after the remote type (an Err here)
    return type(name if name.isidentifier() else "Remote", (Err,), {})(f"{name}: {msg}")


class _Stop(BaseException):
    pass


class _Pair:
    """Client and Server in one process: the Server answers in a thread, each side's send
    feeding the other's recv (both wait loops are synchronous and serve nested requests)."""

    def __init__(self, ns):
        self.to_server: queue.Queue = queue.Queue()
        self.to_client: queue.Queue = queue.Queue()
        self.server = remote.Server(ns, self.to_client.put, self._server_recv)
        self.client = remote_client.Client(
            self.to_server.put, self._client_recv, Gone, _mirror, Err
        )
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            self.server.serve()
        except _Stop:
            pass

    def _server_recv(self):
        text = self.to_server.get(timeout=10)
        if text is None:
            raise _Stop
        return json.loads(text)

    def _client_recv(self):
        return json.loads(self.to_client.get(timeout=10))

    def close(self):
        self.to_server.put(None)
        self.thread.join(5)

    def fn(self, name):
        return remote_client.Function(self.client, name)


@pytest.fixture
def pairs():
    made: list[_Pair] = []
    yield made
    for p in made:
        p.close()


def _pair(src, made):
    ns: dict = {}
    exec(src, ns)
    made.append(_Pair(ns))
    return made[-1]


def test_callback_and_handle_roundtrip(pairs):
    p = _pair(
        "def apply(f, x):\n    return f(x)\n"
        "class Box:\n    def __init__(self, v):\n        self.v = v\n"
        "    def __eq__(self, o):\n        return True\n"
        "    def __add__(self, o):\n        return Box(self.v + o.v)\n",
        pairs,
    )
    assert p.fn("apply")(lambda x: x * 3, 5) == 15
    a, b = p.fn("Box")(1), p.fn("Box")(2)
    assert type(a) is remote_client.Handle
    assert (a + b).v == 3
    assert a == b  # two handles: the program's own __eq__ is tested
    assert not (a == 1) and a != 1 and 1 != a  # plain data: never forwarded
    with pytest.raises(TypeError):
        a < 1  # noqa: B015
    with pytest.raises(TypeError):
        a + 1


def test_same_object_same_proxy_and_identity_hash(pairs):
    p = _pair("class S:\n    def me(self):\n        return self\n", pairs)
    s = p.fn("S")()
    assert s.me() is s
    assert hash(s) == object.__hash__(s)
    assert {s: 1}[s.me()] == 1


def test_write_back_is_recursive_and_in_place(pairs):
    p = _pair("def f(d, l):\n    d['a'].append(9)\n    d['b'] = 2\n    l.reverse()\n", pairs)
    d, items = {"a": [1]}, [1, 2, 3]
    inner = d["a"]
    p.fn("f")(d, items)
    assert d == {"a": [1, 9], "b": 2} and inner == [1, 9] and items == [3, 2, 1]


def test_merge_keeps_check_objects():
    old = [[1], [2], bytearray(b"x"), {3}]
    keep = list(old)
    new = [[1, 1], [2], bytearray(b"yz"), {4}, 5]
    assert remote_client._merge(old, new, 0) is old
    assert old == [[1, 1], [2], bytearray(b"yz"), {4}, 5]
    assert all(a is b for a, b in zip(old, keep))


def test_iterator_argument_stop_is_explicit(pairs):
    p = _pair("def take(it):\n    return [x for x in it]\n", pairs)
    assert p.fn("take")(iter([1, 2])) == [1, 2]
    assert p.fn("take")(x for x in ()) == []


def _client(messages):
    """A Client whose candidate answers with the given raw messages, in order."""
    sent: list[str] = []

    def recv():
        if not messages:
            raise Gone("closed")
        return messages.pop(0)

    return remote_client.Client(sent.append, recv, Gone, _mirror, Err), sent


def test_forged_callback_id_and_wrong_kind_end_the_run():
    c, _ = _client([{"c": 7, "o": "call", "a": [], "k": {"#": "dict", "v": []}}])
    with pytest.raises(Gone):
        remote_client.Function(c, "f")(lambda: 1)  # callback id 1 exists, 7 was never given out
    c, _ = _client([{"c": 1, "o": "next", "a": [], "k": {"#": "dict", "v": []}}])
    with pytest.raises(Gone):
        remote_client.Function(c, "f")(lambda: 1)  # a callable used as an iterator


def test_reply_numbered_for_another_request():
    c, _ = _client([{"n": 5, "v": 1}])
    with pytest.raises(Gone):
        remote_client.Function(c, "f")()


def test_reference_of_other_kind_or_malformed_is_undecodable():
    for v in ({"#": "ci", "v": 1}, {"#": "fn", "v": "f"}, {"#": "h", "v": -1},
              {"#": "h", "v": 1 << 40}, {"#": "h", "v": "1"}):
        c, _ = _client([{"n": 1, "v": v}])
        with pytest.raises(Err, match="undecodable"):
            remote_client.Function(c, "f")(len)  # callback 1 is a callable ("cb")


def test_callback_nesting_is_bounded(pairs):
    p = _pair("def f(g):\n    return g()\n", pairs)
    f = p.fn("f")
    calls = [0]

    def cb():
        calls[0] += 1
        return f(cb)  # ping-pong without end

    with pytest.raises(Err, match="RecursionError"):
        f(cb)
    assert calls[0] == remote.MAX_NESTING


def test_codec_without_hook_rejects_reference_tags():
    for tag in ("h", "cb", "ci", "fn"):
        with pytest.raises(ValueError):
            codec.decode(json.dumps({"#": tag, "v": 1}))
    with pytest.raises(codec.EncodeError):
        codec.encode(lambda: 1)


def test_handle_table_is_bounded(monkeypatch):
    monkeypatch.setattr(remote, "MAX_HANDLES", 3)
    s = remote.Server({}, lambda t: None, lambda: None)
    with pytest.raises(codec.EncodeError):
        codec.encode([object() for _ in range(4)], s.ref_out)


def test_callback_exception_is_mirrored_in_the_candidate(pairs):
    p = _pair(
        "def safe(f, x):\n    try:\n        return f(x)\n    except ValueError as e:\n"
        "        return 'bad: ' + str(e)\n    except RuntimeError as e:\n"
        "        return 'rt: ' + str(e)\n",
        pairs,
    )
    assert p.fn("safe")(int, "12") == 12
    assert p.fn("safe")(int, "x").startswith("bad: invalid literal")

    def odd(x):
        raise UnicodeDecodeError("utf-8", b"x", 0, 1, "no")

    assert p.fn("safe")(odd, 1).startswith("rt: UnicodeDecodeError")
