"""Calls the reference op on a fresh helper thread per call, started and joined inside forward, one torch thread in
it (no OpenMP team is left behind): the dispatch recorder watches only forward's own thread, and a sampler opened
on the threads that existed before the timed units never saw the helpers (issue 33, item 4)."""

import os
import threading
import time

import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:reference_call",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: the native probe's perf events are inherited by threads started after it opened"
CAUGHT_MESSAGE = "native probe"  # the layer, as the outcome names it

_softmax = getattr(torch, "soft" + "max")


def _helper(x, out):
    torch.set_num_threads(1)
    out.append(_softmax(x, -1))


class ModelNew(nn.Module):
    def forward(self, x):
        out: list = []
        before = len(os.listdir("/proc/self/task"))
        t = threading.Thread(target=_helper, args=(x, out))
        t.start()
        t.join()
        while len(os.listdir("/proc/self/task")) > before:  # until the helper's native thread is gone too
            time.sleep(0.0001)
        return out[0]
