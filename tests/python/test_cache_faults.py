"""Fault injection for the kernel cache on disk. No GPU needed: NVRTC fills
the cache and reads it back.

Every case damages a filled cache folder in one way (truncation at every interesting length, bit
flips in the header and the payload, swapped entries, symbolic links, FIFOs, directories, sparse
giants, permissions, foreign owners, concurrent writers, a writer killed in the middle of a write,
stale temporary files, a damaged NVRTC stamp), then runs fresh processes against it, each under a
timeout. Every case must: not crash, not hang, never hand back a damaged or foreign image (each
image is compared with a fresh compile of its own source), and recover (the entry is rebuilt and
read back from disk by the next process, unless the damage cannot be undone by cufunc, in which
case the cache stays on for every other entry).

Each lookup runs in a subprocess: a fresh process is what a user's next run is, a hang must not
hang pytest, and the warn-once state of the cache is per process. Permission cases run the
subprocess without CAP_DAC_OVERRIDE when the tests run as root (setpriv), so that file modes bind
as they do for a user."""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

from cufunc import _core

SOURCES = {
    name: 'extern "C" __global__ void k_%s(int *p) { p[threadIdx.x] = %d; }\n' % (name, value)
    for name, value in (("a", 1), ("b", 2), ("c", 3))
}
ARCH = (9, 0)  # CUBIN: NVRTC makes it without a GPU
HEADER = 88  # CF_CACHE_HEADER_SIZE
TIMEOUT = 60
IS_ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
STAMP = "nvrtc-stamp-v1"

# The child: looks up each named source through the cache, in order, and prints what it got.
DRIVER = r"""
import hashlib, json, sys
from cufunc import _core
src = json.loads(sys.argv[1])
out = {"results": []}
for name in json.loads(sys.argv[2]):
    if name == "reconfigure":
        _core.cache_reconfigure()
        continue
    if name.startswith("pause="):
        _core._test_control("cache_write_pause", name[len("pause="):])
        continue
    try:
        image, is_ptx, origin = _core.compile_source(src[name], arch=(9, 0), cache=True)
        out["results"].append({"name": name, "origin": origin, "ptx": bool(is_ptx),
                               "sha": hashlib.sha256(image).hexdigest()})
    except Exception as exc:
        out["results"].append({"name": name, "error": "%s: %s" % (type(exc).__name__, exc)})
out["stats"] = _core.cache_stats()
out["cache_dir"] = _core.cache_dir()
out["nvrtc_loaded"] = _core.nvrtc_path() != ""
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def refs():
    """sha256 of each source's image, compiled without the cache."""
    return {n: hashlib.sha256(_core.compile_source(s, arch=ARCH)[0]).hexdigest()
            for n, s in SOURCES.items()}


def child_env(cache_dir, extra=None):
    env = dict(os.environ)
    env.pop("CUFUNC_CACHE", None)
    env.pop("CUFUNC_DEBUG", None)
    env["CUFUNC_CACHE_DIR"] = str(cache_dir)
    env.update(extra or {})
    return env


def child_cmd(names, unprivileged=False):
    cmd = [sys.executable, "-c", DRIVER, json.dumps(SOURCES), json.dumps(list(names))]
    if unprivileged and IS_ROOT:
        # Root ignores file modes; without these two capabilities it obeys them like a user.
        cmd = [SETPRIV, "--bounding-set=-dac_override,-dac_read_search"] + cmd
    return cmd


def run(cache_dir, names, unprivileged=False, env=None):
    """Run the driver; returns (report dict, stderr). Fails the test on a hang or a crash."""
    try:
        p = subprocess.run(child_cmd(names, unprivileged), env=child_env(cache_dir, env),
                           capture_output=True, text=True, timeout=TIMEOUT, cwd="/")
    except subprocess.TimeoutExpired:
        pytest.fail("the cache hung: a lookup of %s took over %d s" % (names, TIMEOUT))
    assert p.returncode == 0, "child crashed (rc %d): %s" % (p.returncode, p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def check_images(report, refs):
    """No error, and every image is its own source's, never a damaged or foreign one."""
    for r in report["results"]:
        assert "error" not in r, r
        assert r["sha"] == refs[r["name"]], "wrong image for %s: %s" % (r["name"], r)
        assert r["ptx"] is False, r
    return [r["origin"] for r in report["results"]]


def key_of(name):
    return _core.cache_key(SOURCES[name], arch=ARCH)


def entry_path(cache_dir, name):
    k = key_of(name)
    return cache_dir / k[:2] / (k + ".bin")


def temp_files(cache_dir):
    return sorted(p for p in cache_dir.rglob(".tmp-*"))


@pytest.fixture
def filled(tmp_path, refs):
    """A cache folder holding the entries of a and b (and the NVRTC stamp)."""
    cache_dir = tmp_path / "cache"
    rep, _ = run(cache_dir, ["a", "b"])
    assert check_images(rep, refs) == [0, 0]
    for n in "ab":
        assert entry_path(cache_dir, n).is_file()
    return cache_dir


def expect_rebuilt(cache_dir, refs, name="a", repaired=True):
    """The damaged entry is a miss (compiled again, right image); the cache stays on for the other
    entry (b: a disk hit); the next process reads the rebuilt entry from disk."""
    rep, err = run(cache_dir, [name, "b"])
    assert check_images(rep, refs) == [0, 2], rep
    assert rep["cache_dir"] == str(cache_dir), "the disk cache was turned off: %s" % err
    assert "warning" not in err, err
    rep, _ = run(cache_dir, [name])
    assert check_images(rep, refs) == [2 if repaired else 0]
    if repaired:
        st = os.lstat(entry_path(cache_dir, name))
        assert stat.S_ISREG(st.st_mode)
    assert temp_files(cache_dir) == []


# ---- damaged entry files ----------------------------------------------------------------------

def _truncate(n):
    def damage(path):
        size = path.stat().st_size
        os.truncate(path, n if n >= 0 else size + n)
    return damage


def _flip(offset):
    def damage(path):
        data = bytearray(path.read_bytes())
        at = offset if offset >= 0 else len(data) + offset
        data[at] ^= 0x01  # a single bit: the smallest damage
        path.write_bytes(bytes(data))
    return damage


def _extend(junk):
    def damage(path):
        with open(path, "ab") as f:
            f.write(junk)
    return damage


def _middle_of_payload(path):
    size = path.stat().st_size
    os.truncate(path, HEADER + (size - HEADER) // 2)


def _format_1(path):
    # A valid entry of format 1, whose checksum covered the payload only: refused by its version,
    # never misread under the new layout.
    data = bytearray(path.read_bytes())
    data[8:12] = (1).to_bytes(4, "little")
    data[56:88] = hashlib.sha256(bytes(data[HEADER:])).digest()
    path.write_bytes(bytes(data))


# Offsets in the header: magic 0-7, version 8-11, flags 12-15 (bit 0: PTX), payload size 16-23,
# key 24-55, checksum 56-87; the payload follows.
DAMAGE = {
    "truncate-0": _truncate(0),
    "truncate-1": _truncate(1),
    "truncate-7": _truncate(7),
    "truncate-8": _truncate(8),
    "truncate-12": _truncate(12),
    "truncate-16": _truncate(16),
    "truncate-24": _truncate(24),
    "truncate-56": _truncate(56),
    "truncate-87": _truncate(87),
    "truncate-header-only": _truncate(HEADER),
    "truncate-header+1": _truncate(HEADER + 1),
    "truncate-mid-payload": _middle_of_payload,
    "truncate-last-byte": _truncate(-1),
    "extend-1": _extend(b"\0"),
    "extend-4k": _extend(b"junk" * 1024),
    "flip-magic": _flip(0),
    "flip-version": _flip(8),
    "flip-ptx-flag": _flip(12),
    "flip-flags-high": _flip(15),
    "flip-size": _flip(16),
    "flip-key": _flip(24),
    "flip-checksum": _flip(56),
    "flip-checksum-last": _flip(87),
    "flip-payload-first": _flip(HEADER),
    "flip-payload-last": _flip(-1),
    "format-1-entry": _format_1,
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_damaged_entry_is_rebuilt(filled, refs, how):
    DAMAGE[how](entry_path(filled, "a"))
    expect_rebuilt(filled, refs)


def test_flipped_ptx_flag_is_not_a_hit(filled, refs):
    # A regression once fixed: the flags were outside the checksum, so this was a hit, an ELF
    # image handed back as PTX.
    _flip(12)(entry_path(filled, "a"))
    rep, _ = run(filled, ["a"])
    assert rep["results"][0]["origin"] == 0
    assert rep["results"][0]["ptx"] is False


def test_swapped_entries(filled, refs):
    # a's file under b's name and b's under a's: valid entries, of the wrong key.
    pa, pb = entry_path(filled, "a"), entry_path(filled, "b")
    da, db = pa.read_bytes(), pb.read_bytes()
    pa.write_bytes(db)
    pb.write_bytes(da)
    rep, _ = run(filled, ["a", "b"])
    assert check_images(rep, refs) == [0, 0]
    rep, _ = run(filled, ["a", "b"])
    assert check_images(rep, refs) == [2, 2]


def test_sparse_giant_entry(filled, refs):
    # A 1 TiB file (sparse: no disk used): refused by its size, never allocated.
    path = entry_path(filled, "a")
    with open(path, "r+b") as f:
        f.truncate(1 << 40)
    expect_rebuilt(filled, refs)


def test_entry_a_little_over_the_bound(filled, refs):
    path = entry_path(filled, "a")
    with open(path, "r+b") as f:
        f.truncate(HEADER + (256 << 20) + 1)
    expect_rebuilt(filled, refs)


def _replace(path, make):
    path.unlink()
    make(path)


NOT_A_FILE = {
    "fifo": lambda p: os.mkfifo(p),
    "symlink-dev-zero": lambda p: os.symlink("/dev/zero", p),
    "symlink-dangling": lambda p: os.symlink(str(p) + ".nowhere", p),
    "symlink-loop": lambda p: os.symlink(p.name, p),
}


@pytest.mark.parametrize("kind", sorted(NOT_A_FILE))
def test_entry_not_a_regular_file(filled, refs, kind):
    path = entry_path(filled, "a")
    _replace(path, NOT_A_FILE[kind])
    expect_rebuilt(filled, refs)


def test_entry_symlink_to_a_valid_entry_elsewhere(filled, refs, tmp_path):
    # Even a link to the right bytes is not followed: an entry is loaded only from the folder
    # that is checked (owner, mode); the link is replaced by a real entry.
    path = entry_path(filled, "a")
    elsewhere = tmp_path / "elsewhere.bin"
    shutil.copyfile(path, elsewhere)
    _replace(path, lambda p: os.symlink(str(elsewhere), p))
    expect_rebuilt(filled, refs)
    assert elsewhere.read_bytes()[:8] == b"CUFUNCK\0"  # the link's target was left alone


def test_directory_at_entry_path(filled, refs):
    # One bad entry, not a broken folder: the cache stays on (b is read from disk, c is stored),
    # a is compiled each time since the directory cannot be replaced, and nothing warns.
    path = entry_path(filled, "a")
    _replace(path, lambda p: (p.mkdir(), (p / "x").write_bytes(b"x")))
    for _ in range(2):
        rep, err = run(filled, ["a", "b", "c"])
        origins = check_images(rep, refs)
        assert origins[:2] == [0, 2]
        assert rep["cache_dir"] == str(filled)
        assert "warning" not in err, err
    assert origins[2] == 2  # c was stored by the first process
    assert path.is_dir()


@pytest.mark.skipif(IS_ROOT and not SETPRIV, reason="root without setpriv ignores file modes")
def test_unreadable_entry(filled, refs):
    path = entry_path(filled, "a")
    path.chmod(0)
    rep, _ = run(filled, ["a", "b"], unprivileged=True)
    assert check_images(rep, refs) == [0, 2]
    rep, _ = run(filled, ["a"], unprivileged=True)
    assert check_images(rep, refs) == [2]


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_entry_writable_by_others_is_not_loaded(filled, refs, mode):
    path = entry_path(filled, "a")
    path.chmod(mode)
    expect_rebuilt(filled, refs)
    assert stat.S_IMODE(entry_path(filled, "a").stat().st_mode) & 0o022 == 0


@pytest.mark.skipif(not IS_ROOT, reason="giving a file to another user needs root")
def test_entry_owned_by_another_user_is_not_loaded(filled, refs):
    os.chown(entry_path(filled, "a"), 12345, 12345)
    expect_rebuilt(filled, refs)
    assert entry_path(filled, "a").stat().st_uid == os.geteuid()


# ---- the folder -------------------------------------------------------------------------------

def test_new_folder_is_private(tmp_path, refs):
    cache_dir = tmp_path / "new" / "cache"
    rep, _ = run(cache_dir, ["a"])
    check_images(rep, refs)
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry_path(cache_dir, "a").parent.stat().st_mode) == 0o700


def _untrusted_folder(cache_dir, refs, names=("a", "b")):
    """Warned once, nothing loaded from the folder, nothing written to it, memory still works."""
    before = sorted(str(p) for p in cache_dir.rglob("*"))
    rep, err = run(cache_dir, list(names) + ["a", "c"])
    assert check_images(rep, refs) == [0] * len(names) + [1, 0]
    assert err.count("warning") == 1, err
    assert str(cache_dir) in err and "not trusted" in err, err
    assert rep["stats"]["disk_writes"] == 0
    assert sorted(str(p) for p in cache_dir.rglob("*")) == before


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o1777])
def test_folder_writable_by_others_is_not_used(filled, refs, mode):
    filled.chmod(mode)
    _untrusted_folder(filled, refs)


@pytest.mark.skipif(not IS_ROOT, reason="giving a folder to another user needs root")
def test_folder_owned_by_another_user_is_not_used(filled, refs):
    # Another user made the folder first (a shared /tmp path): their entries are never loaded.
    os.chown(filled, 12345, 12345)
    _untrusted_folder(filled, refs)


@pytest.mark.parametrize("mode", [0o770, 0o777])
def test_shard_writable_by_others_is_not_used(filled, refs, mode):
    entry_path(filled, "a").parent.chmod(mode)
    rep, _ = run(filled, ["a", "b"])
    assert check_images(rep, refs)[0] == 0


@pytest.mark.skipif(IS_ROOT and not SETPRIV, reason="root without setpriv ignores file modes")
def test_read_only_folder_is_read(filled, refs):
    # A site-wide cache prepared by an administrator: read it, write nothing, say nothing.
    for p in sorted(filled.rglob("*"), reverse=True) + [filled]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        before = sorted(str(p) for p in filled.rglob("*"))
        rep, err = run(filled, ["a", "b", "c"], unprivileged=True)
        assert check_images(rep, refs) == [2, 2, 0]
        assert rep["cache_dir"] == str(filled)
        assert "warning" not in err, err
        assert rep["stats"]["disk_writes"] == 0
        assert sorted(str(p) for p in filled.rglob("*")) == before
    finally:
        for p in [filled] + sorted(filled.rglob("*")):
            if p.is_dir():
                p.chmod(0o700)


# ---- the NVRTC stamp --------------------------------------------------------------------------

def test_warm_process_uses_the_stamp(filled, refs):
    rep, _ = run(filled, ["a", "b"])
    assert check_images(rep, refs) == [2, 2]
    assert rep["nvrtc_loaded"] is False


STAMP_DAMAGE = {
    "fifo": lambda p: os.mkfifo(p),
    "directory": lambda p: p.mkdir(),
    "symlink-dev-zero": lambda p: os.symlink("/dev/zero", p),
    "sparse-giant": lambda p: open(p, "wb").truncate(1 << 40),
    "group-writable": None,
}


@pytest.mark.parametrize("how", sorted(STAMP_DAMAGE))
def test_damaged_stamp(filled, refs, how):
    stamp = filled / STAMP
    assert stamp.is_file()
    if how == "group-writable":
        stamp.chmod(0o664)
    else:
        _replace(stamp, STAMP_DAMAGE[how])
    rep, err = run(filled, ["a", "b"])
    assert check_images(rep, refs) == [2, 2]
    assert rep["nvrtc_loaded"] is True  # not trusted: NVRTC loaded to learn its version
    assert "warning" not in err, err
    if how != "directory":
        # rewritten as a good stamp: the next process skips NVRTC again
        rep, _ = run(filled, ["a"])
        assert check_images(rep, refs) == [2]
        assert rep["nvrtc_loaded"] is False


# ---- several processes ------------------------------------------------------------------------

def test_concurrent_writers(tmp_path, refs):
    cache_dir = tmp_path / "cache"
    orders = [["a", "b", "c"], ["c", "b", "a"], ["b", "a", "c"]] * 2
    procs = [subprocess.Popen(child_cmd(o), env=child_env(cache_dir), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for o in orders]
    try:
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail("concurrent writers hung")
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        check_images(json.loads(out.strip().splitlines()[-1]), refs)
    assert temp_files(cache_dir) == []
    rep, _ = run(cache_dir, ["a", "b", "c"])
    assert check_images(rep, refs) == [2, 2, 2]


def _paused_writer(cache_dir, marker):
    """A child that stops in the middle of writing a's entry (the test-only hook)."""
    p = subprocess.Popen(child_cmd(["pause=%s" % marker, "a"]), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=child_env(cache_dir))
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            pytest.fail("the writer never reached the pause: %s" % (p.communicate()[1],))
        time.sleep(0.02)
    return p


def test_kill_9_in_the_middle_of_a_write(tmp_path, refs):
    cache_dir = tmp_path / "cache"
    p = _paused_writer(cache_dir, tmp_path / "paused")
    temps = temp_files(cache_dir)
    assert len(temps) == 1 and str(p.pid) in temps[0].name  # the writer's pid is in the name
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=TIMEOUT)
    assert not entry_path(cache_dir, "a").exists()  # never a part under the entry's name
    rep, _ = run(cache_dir, ["a"])
    assert check_images(rep, refs) == [0]
    rep, _ = run(cache_dir, ["a"])
    assert check_images(rep, refs) == [2]
    # The dead writer's file is young: kept (its age is what tells it from a slow writer).
    assert temp_files(cache_dir) == temps
    old = time.time() - 3600
    os.utime(temps[0], (old, old))
    rep, _ = run(cache_dir, ["b"])  # a process that writes sweeps the stale file
    assert check_images(rep, refs) == [0]
    assert temp_files(cache_dir) == []


def test_stale_temp_files(filled, refs):
    shard = entry_path(filled, "a").parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    hour, two_days = time.time() - 3600, time.time() - 2 * 86400
    plant = {  # name -> (mtime, swept?)
        ".tmp-%s-%d-AbCdEf" % (key_of("a")[:16], dead.pid): (hour, True),  # old, writer dead
        ".tmp-nvrtc-stamp-v1-%d-XyZ123" % dead.pid: (hour, True),  # the stamp's, at the top
        ".tmp-%s-%d-QwErTy" % (key_of("b")[:16], dead.pid): (time.time(), False),  # young
        ".tmp-%s-%d-LiVe01" % (key_of("a")[:16], os.getpid()): (hour, False),  # writer alive
        ".tmp-%s-%d-AnCnt1" % (key_of("a")[:16], os.getpid()): (two_days, True),  # ancient
        ".tmp-not-ours": (hour, False),  # not a name cufunc makes: not ours to delete
    }
    paths = {}
    for name, (mtime, _) in plant.items():
        p = (filled if "stamp" in name else shard) / name
        p.write_bytes(b"partial")
        os.utime(p, (mtime, mtime))
        paths[name] = p
    rep, _ = run(filled, ["c"])  # a writing process
    assert check_images(rep, refs) == [0]
    for name, (_, swept) in plant.items():
        assert paths[name].exists() != swept, name
