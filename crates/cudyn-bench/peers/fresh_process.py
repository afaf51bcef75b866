"""One measurement in a new Python process, so that it starts as a new program would."""

import os
import subprocess
import sys


def run_fresh(script, args, cupy_cache_dir, marker):
    """Runs `script --child ARGS` in a new interpreter, with CuPy's disk cache in
    `cupy_cache_dir` and its other cache settings at their defaults.

    Returns (the words after `marker` on the child's result line, None) when it succeeded, or
    (None, what it printed and its exit status) for a message when it did not."""
    env = dict(os.environ, CUPY_CACHE_DIR=cupy_cache_dir)
    for name in ("CUPY_CACHE_IN_MEMORY", "CUPY_CACHE_SAVE_CUDA_SOURCE"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, os.path.abspath(script), "--child", *args],
        env=env, capture_output=True, text=True,
    )
    if done.returncode == 0:
        for line in done.stdout.splitlines():
            if line.startswith(marker):
                return line[len(marker):].split(), None
    return None, f"exit status {done.returncode}: {(done.stdout + done.stderr).strip()[-2000:]}"
