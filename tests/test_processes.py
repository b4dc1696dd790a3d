"""A child tied to its parent goes when the parent goes: killed outright, or already gone before the child asked
the kernel to tell it (the window between fork and the request, where a `kaliper run` killed at the wrong moment
once left its server running)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A reaper for its grandchild (PR_SET_CHILD_SUBREAPER), a parent that forks the child and ends as the case says,
# and the child, tied to the parent with `die_with_parent`, that would sleep for a minute unless a signal comes.
# It prints how the child ended.
FAMILY = textwrap.dedent(
    """
    import ctypes, os, sys, time
    from kaliper.processes import die_with_parent

    case = sys.argv[1]
    ctypes.CDLL("libc.so.6").prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come to this process
    armed_r, armed_w = os.pipe()
    parent = os.fork()
    if parent == 0:
        me = os.getpid()
        if os.fork() == 0:
            if case == "parent-gone-first":
                while os.getppid() == me:  # the parent ends before the child asks to follow it
                    time.sleep(0.01)
            die_with_parent(me)
            os.write(armed_w, b"x")
            if case == "parent-lives":
                os._exit(7)
            time.sleep(60)
            os._exit(0)
        if case == "parent-killed":
            os.read(armed_r, 1)
            os.kill(me, 9)
        if case == "parent-lives":
            _, status = os.wait()
            os._exit(os.waitstatus_to_exitcode(status))
        os._exit(0)
    _, status = os.waitpid(parent, 0)  # in "parent-lives", the parent ends as its child did
    if case != "parent-lives":
        _, status = os.wait()  # the orphaned child, reaped here
    print(os.waitstatus_to_exitcode(status))
    """
)


def how_the_child_ended(case: str) -> str:
    done = subprocess.run([sys.executable, "-c", FAMILY, case], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_child_whose_parent_is_killed_outright_gets_sigterm() -> None:
    assert how_the_child_ended("parent-killed") == "-15"


def test_a_child_whose_parent_ended_before_it_asked_sends_itself_sigterm() -> None:
    assert how_the_child_ended("parent-gone-first") == "-15"


def test_a_child_whose_parent_lives_runs_on() -> None:
    assert how_the_child_ended("parent-lives") == "7"
