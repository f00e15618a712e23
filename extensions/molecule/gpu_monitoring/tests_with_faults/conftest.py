"""The same helpers as tests/ (scrape from inside the node, the emulated hardware's own reports)."""
import importlib.util
import pathlib

_SPEC = importlib.util.spec_from_file_location(
    "gpu_monitoring_conftest", str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "conftest.py"))
_HELPERS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_HELPERS)

listen, scrape, hardware, verdict, of_gpu = (_HELPERS.listen, _HELPERS.scrape, _HELPERS.hardware, _HELPERS.verdict,
                                             _HELPERS.of_gpu)
