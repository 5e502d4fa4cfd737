"""Helpers of the container tests (test_image.py, test_cluster_containers.py):
podman as these machines run it (runc, cgroupfs), containers started and
removed by name, their published ports, and bounded waits.

Environment (set by scripts/image.sh --test): SYMPHONY_IMAGE (the image to
test), plus oip_harness's SYMPHONY_PROTO_DIR and SYMPHONY_TEST_MODELS.
Every container started here is removed at exit; every wait is bounded.
"""
import atexit
import os
import shutil
import subprocess
import time

IMAGE = os.environ.get("SYMPHONY_IMAGE", "symphony:latest")
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
_CONTAINERS = []
_NETWORKS = []


def podman(*args, timeout=120, check=True):
    """Runs podman; returns the CompletedProcess (text). Raises with its output when check and it fails."""
    p = subprocess.run(PODMAN + list(args), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("podman %s failed (%d):\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def _cleanup():
    for name in _CONTAINERS:
        podman("rm", "-f", "-t", "0", name, check=False, timeout=60)
    for net in _NETWORKS:
        podman("network", "rm", "-f", net, check=False, timeout=60)


atexit.register(_cleanup)


def unique(stem):
    """A container or network name no other run uses."""
    return "%s-%d-%d" % (stem, os.getpid(), int(time.monotonic() * 1000) % 100000)


def network(stem):
    """Creates a podman network (its containers find each other by name); removed at exit."""
    name = unique(stem)
    podman("network", "create", name)
    _NETWORKS.append(name)
    return name


def run(name, args, publish=(), volumes=(), env=(), extra=()):
    """Starts IMAGE detached as `name` with the entrypoint's `args`; each port
    in `publish` on a free loopback port of this machine. Removed at exit."""
    cmd = ["run", "-d", "--name", name]
    for port in publish:
        cmd += ["-p", "127.0.0.1::%d" % port]
    for v in volumes:
        cmd += ["-v", v]
    for e in env:
        cmd += ["-e", e]
    cmd += list(extra) + [IMAGE] + list(args)
    _CONTAINERS.append(name)
    podman(*cmd)
    return name


def host_port(name, port):
    """The loopback HOST:PORT that container `name`'s `port` is published on."""
    out = podman("port", name, "%d/tcp" % port).stdout.strip().splitlines()[0]
    return out.replace("0.0.0.0", "127.0.0.1")


def state(name):
    """(status, exit code) of a container: ('running', 0), ('exited', 3), ..."""
    out = podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name).stdout.split()
    return out[0], int(out[1])


def logs(name):
    p = podman("logs", name, check=False)
    return p.stdout + p.stderr


def wait_until(what, pred, timeout, container=None):
    """Waits (bounded) until pred() holds; fails with the container's log if it exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if pred():
                return
        except Exception:  # not up yet: connection refused, 503, ...
            pass
        if container and state(container)[0] != "running":
            raise AssertionError("%s exited (%s) before %s:\n%s" % (container, state(container), what, logs(container)))
        if time.monotonic() > deadline:
            raise AssertionError("no %s within %d s%s" % (what, timeout, ":\n" + logs(container) if container else ""))
        time.sleep(0.25)


def wait_exit(name, timeout):
    """Waits (bounded) for the container to exit; returns its exit code."""
    p = podman("wait", name, timeout=timeout + 10, check=False)
    if p.returncode != 0:
        raise AssertionError("podman wait %s: %s%s" % (name, p.stdout, p.stderr))
    return int(p.stdout.strip().splitlines()[-1])


def writable_copy(src):
    """A copy of folder `src` that the image's non-root user may write (profiles are saved beside the models)."""
    import tempfile
    dst = tempfile.mkdtemp(prefix="symphony-container-")
    atexit.register(shutil.rmtree, dst, True)
    shutil.copytree(src, dst, dirs_exist_ok=True)
    for root, dirs, files in os.walk(dst):
        os.chmod(root, 0o777)
        for f in files:
            os.chmod(os.path.join(root, f), 0o666)
    return dst
