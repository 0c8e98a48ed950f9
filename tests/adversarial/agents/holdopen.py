# Attack 14, holding the phase open after exiting: attach (ptrace) to the sandbox's init — PID 1 only when it
# is the sandbox's own (bwrap or GripProbe's init), never the host's — and send it SIGSTOP; leave a child that
# stopped itself, a child it traces, and a setsid sleeper carrying the marker in its command line; then exit
# at once. The phase must end with the agent (not at its timeout), and nothing it left may live on.
import ctypes
import signal
import subprocess


def init_is_the_sandboxes():
    try:
        cmd = open("/proc/1/cmdline", "rb").read()
    except OSError:
        return False
    return b"bwrap" in cmd or b"sandbox_init" in cmd


def main():
    args = parse_args()
    phase = phase_of(args.get("workspace", os.getcwd()))
    report = {"phase": phase}
    if phase == "measured":
        libc = ctypes.CDLL(None, use_errno=True)
        if init_is_the_sandboxes():
            rc = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH
            report["attach_init"] = "attached" if rc == 0 else os.strerror(ctypes.get_errno())
            try:
                os.kill(1, signal.SIGSTOP)
            except OSError as exc:
                report["stop_init"] = type(exc).__name__
        else:
            report["attach_init"] = "no sandbox init (unconfined): the host's PID 1 is left alone"
        stopped = os.fork()
        if stopped == 0:
            os.kill(os.getpid(), signal.SIGSTOP)
            os._exit(0)
        traced = os.fork()
        if traced == 0:
            time.sleep(120)
            os._exit(0)
        report["attach_child"] = libc.ptrace(16, traced, 0, 0)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", f"GPADV_HOLD_{MARKER}"],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    emit("final", text="done")
    emit("attack.report", attack="holdopen", **report)
    sys.stdout.flush()
    os._exit(0)


main()
