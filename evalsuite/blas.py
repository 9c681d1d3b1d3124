"""The command line's own process loads numpy's and scipy's OpenBLAS with one thread.

OpenBLAS starts a thread per core when it is loaded, and each spins for about a tenth of a second
waiting for work: `import numpy` took 0.16 s of CPU on two cores against 0.07 with one thread, and
over a second on machines with 16 or more (numpy issue 29193), the kind an engine developer's GPU
node has by the dozen.  Every command pays it, and a run's client CPU a token with it.  The suite's
arithmetic (bootstraps, tests over a few thousand numbers, columns of token ids) has no matrix
products that threads would speed up.

The setting is the process's own: the servers the suite starts get the environment as the user
left it (`user_environ`).  Where the user set the variable, theirs stands.
"""

from __future__ import annotations

import os

VARIABLE = "OPENBLAS_NUM_THREADS"

_set_here = False


def one_blas_thread() -> bool:
    """Ask OpenBLAS for one thread in this process, unless the user chose; whether it was set here.

    It takes effect for the BLAS libraries loaded after it: call it before numpy's first import.
    """
    global _set_here
    if VARIABLE not in os.environ:
        os.environ[VARIABLE] = "1"
        _set_here = True
    return _set_here


def user_environ() -> dict[str, str]:
    """This process's environment without what `one_blas_thread` added: for the programs it starts."""
    env = dict(os.environ)
    if _set_here and env.get(VARIABLE) == "1":
        del env[VARIABLE]
    return env
