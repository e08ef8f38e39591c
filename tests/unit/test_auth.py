"""Identities without Ray: users, tokens and the checks every scheduler call makes.

:mod:`lyra_ray.runtime.auth` over a real :class:`StateStore` in ``tmp_path``: an open
scheduler until the first (admin) user, then every call needs a valid token; only a
salted hash is kept; ownership; and the users survive a restarted scheduler.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.runtime.auth import (
    OPEN,
    AuthError,
    Identity,
    Users,
    check_name,
    new_token,
    parse_token,
)
from lyra_ray.runtime.store import StateStore

TOKEN_SHAPE = re.compile(r"lyra_[0-9a-f]{16}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


@pytest.fixture
def users(store: StateStore) -> Users:
    return Users(store)


def _admin(users: Users, name: str = "root") -> str:
    token = users.add(name, True, None)["token"]
    assert isinstance(token, str)
    return token


# ---------------------------------------------------------------------- open scheduler


def test_no_user_means_open(users: Users) -> None:
    assert not users.enabled
    for token in (None, "", "garbage", 42):
        who = users.identify(token)
        assert who is OPEN
        assert who.open and who.admin and who.name is None
    assert OPEN.may_touch(None) and OPEN.may_touch("anyone")
    assert users.list(None) == []  # an open scheduler allows every call


def test_first_user_must_be_admin(users: Users) -> None:
    with pytest.raises(InputError, match=r"field 'admin'.*must be an admin"):
        users.add("alice", False, None)
    assert not users.enabled and users.list(None) == []


def test_first_admin_needs_no_token_and_turns_identities_on(users: Users) -> None:
    reply = users.add("root", True, None)
    assert reply["name"] == "root" and reply["admin"] is True
    assert TOKEN_SHAPE.fullmatch(reply["token"])
    assert users.enabled
    who = users.identify(reply["token"])
    assert who == Identity("root", True) and not who.open
    with pytest.raises(AuthError, match="requires a token"):
        users.identify(None)


def test_admin_flag_must_be_bool(users: Users) -> None:
    with pytest.raises(InputError, match="field 'admin'"):
        users.add("root", "yes", None)  # type: ignore[arg-type]


def test_racing_bootstraps_make_one_admin(users: Users) -> None:
    results: list[Any] = []

    def add(name: str) -> None:
        try:
            results.append(users.add(name, True, None)["name"])
        except AuthError as e:
            results.append(e)

    threads = [threading.Thread(target=add, args=(n,)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [r for r in results if isinstance(r, str)]
    assert len(names) == 1 and sum(isinstance(r, AuthError) for r in results) == 1
    assert [u["name"] for u in users.list(_token_of(users, names[0]))] == names


def _token_of(users: Users, name: str) -> str:
    """A fresh token for ``name``, issued directly in the store (test helper)."""
    token, token_id, salt, digest = new_token()
    assert users.store.add_token(name, token_id, salt, digest, 0.0)
    return token


# ---------------------------------------------------------------------- admins only


def test_only_admins_manage_users(users: Users) -> None:
    root = _admin(users)
    alice = users.add("alice", False, root)["token"]
    assert users.identify(alice) == Identity("alice", False)
    for call in (
        lambda: users.add("bob", False, alice),
        lambda: users.remove("root", alice),
        lambda: users.list(alice),
        lambda: users.issue("alice", alice),
        lambda: users.require_admin(alice, "shutting the scheduler down"),
    ):
        with pytest.raises(AuthError, match="for admins only; you are 'alice'"):
            call()
    for call in (lambda: users.add("bob", False, None), lambda: users.list(None)):
        with pytest.raises(AuthError, match="requires a token"):
            call()
    assert [u["name"] for u in users.list(root)] == ["alice", "root"]
    # an admin may make more admins, who may then manage users too
    carol = users.add("carol", True, root)["token"]
    users.add("dave", False, carol)
    rows = {u["name"]: u["admin"] for u in users.list(carol)}
    assert rows == {"alice": False, "carol": True, "dave": False, "root": True}
    assert all(isinstance(u["created"], float) for u in users.list(root))


def test_duplicate_and_unknown_users(users: Users) -> None:
    root = _admin(users)
    users.add("alice", False, root)
    with pytest.raises(InputError, match="field 'name': user 'alice' exists"):
        users.add("alice", True, root)
    with pytest.raises(InputError, match="field 'name': no user 'zed'"):
        users.issue("zed", root)
    with pytest.raises(InputError, match="field 'name': no user 'zed'"):
        users.remove("zed", root)


def test_issue_adds_a_token_and_keeps_the_old(users: Users) -> None:
    root = _admin(users)
    first = users.add("alice", False, root)["token"]
    second = users.issue("alice", root)["token"]
    assert first != second and TOKEN_SHAPE.fullmatch(second)
    assert users.identify(first) == users.identify(second) == Identity("alice", False)


# ---------------------------------------------------------------------- bad tokens


def test_missing_and_empty_token(users: Users) -> None:
    _admin(users)
    for token in (None, ""):
        with pytest.raises(AuthError, match="requires a token: set LYRA_TOKEN"):
            users.identify(token)


@pytest.mark.parametrize(
    "token",
    [
        "garbage",
        "lyra_",
        "lyra_0123_abc",
        "lyra_0123456789ABCDEF_" + "a" * 43,  # uppercase id
        "lyra_0123456789abcdef_" + "a" * 42,  # short secret
        "lyra_0123456789abcdef_" + "a" * 44,  # long secret
        "lyra_0123456789abcdef_" + "a" * 42 + "=",
        "   ",
        42,
        b"lyra_0123456789abcdef_" + b"a" * 43,
        ["lyra"],
    ],
)
def test_malformed_token(users: Users, token: Any) -> None:
    _admin(users)
    assert parse_token(token) is None
    with pytest.raises(AuthError, match="invalid lyra token") as e:
        users.identify(token)
    assert isinstance(e.value, PermissionError)


def test_wrong_secret_and_unknown_id(users: Users) -> None:
    root = _admin(users)
    token_id, secret = parse_token(root) or ("", "")
    other = "B" if secret[-1] != "B" else "C"
    for bad in (
        f"lyra_{token_id}_{secret[:-1]}{other}",  # right id, wrong secret
        f"lyra_{'0' * 16}_{secret}",  # unknown id (another cluster)
        new_token()[0],  # well formed, never issued here
    ):
        assert parse_token(bad) is not None
        with pytest.raises(AuthError, match="invalid lyra token"):
            users.identify(bad)


def test_token_read_from_a_file_keeps_working(users: Users) -> None:
    root = _admin(users)
    assert users.identify(f"  {root}\n") == Identity("root", True)


def test_removed_user_token_is_revoked(users: Users) -> None:
    root = _admin(users)
    alice = users.add("alice", False, root)["token"]
    extra = users.issue("alice", root)["token"]
    assert users.remove("alice", root) == {"name": "alice", "removed_by": "root"}
    for token in (alice, extra):
        with pytest.raises(AuthError, match="invalid lyra token"):
            users.identify(token)
    assert users.store.token(parse_token(alice)[0]) is None  # type: ignore[index]
    assert [u["name"] for u in users.list(root)] == ["root"]
    # the name is free again, with a new token
    again = users.add("alice", False, root)["token"]
    assert users.identify(again).name == "alice"
    with pytest.raises(AuthError):
        users.identify(alice)


# ---------------------------------------------------------------------- hash only


def test_only_a_salted_hash_is_stored(users: Users, store: StateStore) -> None:
    root = _admin(users)
    alice = users.add("alice", False, root)["token"]
    tokens = [root, alice, users.issue("alice", root)["token"]]
    for token in tokens:
        token_id, secret = parse_token(token) or ("", "")
        row = store.token(token_id)
        assert row is not None
        _, _, salt, digest = row
        assert len(salt) == 16
        assert digest == hashlib.sha256(salt + secret.encode()).digest()
    salts = [store.token(parse_token(t)[0])[2] for t in tokens]  # type: ignore[index]
    assert len(set(salts)) == len(salts)
    files = sorted(store.dir.glob("lyra.sqlite*"))
    assert files and store.path in files
    blob = b"".join(f.read_bytes() for f in files)
    for token in tokens:
        secret = (parse_token(token) or ("", ""))[1]
        assert token.encode() not in blob
        assert secret.encode() not in blob


def test_new_token_shape_and_digest() -> None:
    token, token_id, salt, digest = new_token()
    assert TOKEN_SHAPE.fullmatch(token)
    assert parse_token(token) == (token_id, token.split("_", 2)[2])
    assert digest == hashlib.sha256(salt + parse_token(token)[1].encode()).digest()  # type: ignore[index]
    assert new_token()[0] != token


# ---------------------------------------------------------------------- ownership


def test_may_touch() -> None:
    alice = Identity("alice", False)
    admin = Identity("root", True)
    assert alice.may_touch("alice")
    assert not alice.may_touch("bob")
    assert not alice.may_touch(None)  # a job from the open days is an admin's
    assert admin.may_touch("alice") and admin.may_touch(None)
    assert not alice.open and not admin.open


# ---------------------------------------------------------------------- last admin


def test_last_admin_cannot_be_removed(users: Users) -> None:
    root = _admin(users)
    users.add("alice", False, root)
    with pytest.raises(InputError, match="field 'name': 'root' is the last admin"):
        users.remove("root", root)
    carol = users.add("carol", True, root)["token"]
    users.remove("root", carol)  # with another admin, it may go
    with pytest.raises(AuthError):
        users.identify(root)
    with pytest.raises(InputError, match="'carol' is the last admin"):
        users.remove("carol", carol)
    users.remove("alice", carol)
    assert [u["name"] for u in users.list(carol)] == ["carol"]
    assert users.enabled


# ---------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name",
    ["", "Alice", "a" * 33, 7, None, "a\nb", "alice\n", "1abc", "_x", "a b", "al/ce", "é"],
)
def test_bad_user_names(users: Users, name: Any) -> None:
    with pytest.raises(InputError, match="field 'name'"):
        check_name(name)
    with pytest.raises(InputError, match="field 'name'"):
        users.add(name, True, None)  # open: the name is checked before anything else
    root = _admin(users)
    calls: list[Callable[[], object]] = [
        lambda: users.add(name, False, root),
        lambda: users.issue(name, root),
        lambda: users.remove(name, root),
    ]
    for call in calls:
        with pytest.raises(InputError, match="field 'name'"):
            call()


@pytest.mark.parametrize("name", ["a", "alice", "a-b_9", "z" + "0" * 31])
def test_good_user_names(name: str) -> None:
    assert check_name(name) == name


# ---------------------------------------------------------------------- restarts


def test_users_survive_a_restarted_store(tmp_path: Path) -> None:
    first = StateStore(tmp_path / "state")
    users = Users(first)
    root = _admin(users)
    alice = users.add("alice", False, root)["token"]
    bob = users.add("bob", False, root)["token"]
    users.remove("bob", root)
    first.close()

    again = StateStore(tmp_path / "state")
    try:
        restarted = Users(again)
        assert restarted.enabled
        assert restarted.identify(root) == Identity("root", True)
        assert restarted.identify(alice) == Identity("alice", False)
        for token in (None, bob):
            with pytest.raises(AuthError):
                restarted.identify(token)
        assert [u["name"] for u in restarted.list(root)] == ["alice", "root"]
        with pytest.raises(AuthError):  # no second bootstrap after a restart
            restarted.add("eve", True, None)
    finally:
        again.close()
