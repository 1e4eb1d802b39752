"""The short-lived child process that exports a model for the torch-free query encoder.

``python -m operators.models.query_encoder_export <model> <parent pid>`` (started by
``onnx_query_encoder.export_query_encoder``): torch, the model and the exporter load here and go when the
export is done, so the process that asked (a Serve replica, a Ray task worker that lives for hundreds of tasks)
gets the ONNX file without torch's memory. The child dies with its parent (Linux: ``PR_SET_PDEATHSIG``), and
SIGTERM ends it through Python, so ``export_onnx`` removes its partial file. Exit status: 0 with the file on
stdout, ``NOT_ON_CPU`` when the model's torch copy would not run on the CPU here (no export: its queries go
through torch), else 1 with the reason on the last line of stderr.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

NOT_ON_CPU = 3


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # unwinds: the partial file goes
    if os.getppid() != parent:  # the parent died before the line above took effect
        sys.exit(128 + signal.SIGTERM)


def main(argv: list[str]) -> int:
    reference, parent = argv[0], int(argv[1])
    _die_with_parent(parent)
    try:
        from operators.models.references import resolve_model_path
        from operators.models.sentence_transformers import export_onnx, load_sentence_transformer

        model = load_sentence_transformer(reference)
        if not str(model.device).startswith("cpu"):
            print(f"the model runs on {model.device} here", file=sys.stderr)
            return NOT_ON_CPU
        print(export_onnx(model, resolve_model_path(reference)))
        return 0
    except Exception as err:  # noqa: BLE001 - the parent logs the reason, once
        traceback.print_exc()
        print(f"{type(err).__name__}: {err}".replace("\n", " "), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
