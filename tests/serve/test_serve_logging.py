"""In a replica, ``tessera.serve``'s records (a 500's traceback among them) go through Serve's own logging: Serve's
``LoggingConfig`` level and format, and the replica's ``logs/serve/`` file, not bare lines in the worker's .err
file. Serve's real logger setup (``configure_component_logger``, as a replica runs it), without starting Serve."""

from __future__ import annotations

import logging

import pytest

from serve.http import errors
from tests.text_checks import TRACEBACK


@pytest.fixture
def serve_logger(tmp_path):
    """Serve's logger configured as in a replica, writing under ``tmp_path``; every logger put back afterwards."""
    from ray.serve._private.logging_utils import configure_component_logger
    from ray.serve.schema import LoggingConfig

    serve_log, ours = logging.getLogger(errors.SERVE_LOGGER), logging.getLogger("tessera.serve")
    saved = [(logger, logger.handlers[:], logger.level, logger.propagate) for logger in (serve_log, ours)]
    configure_component_logger(component_name="tessera_api", component_id="r1", component_type=None,
                               logging_config=LoggingConfig(logs_dir=str(tmp_path), log_level="INFO"),
                               max_bytes=1_000_000, backup_count=1)
    yield tmp_path
    for logger, handlers, level, propagate in saved:
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate


def test_a_server_error_lands_in_the_replica_log_with_time_level_and_traceback(serve_logger):
    assert errors.log_through_serve()
    try:
        raise RuntimeError("the store went away")
    except RuntimeError as err:
        failure = errors.server_error("GET /tasks", err, code="internal_error")
    logging.getLogger("tessera.serve").info("warmed up")
    (log_file,) = serve_logger.glob("*.log")
    text = log_file.read_text()
    error_line = next(line for line in text.splitlines() if "GET /tasks failed" in line)
    assert error_line.split()[0] == "ERROR" and error_line.split()[1][:2] == "20"  # level, then the date
    assert "Traceback" in text and "RuntimeError: the store went away" in text
    assert "INFO" in text and "warmed up" in text
    assert failure.status == 500 and TRACEBACK not in failure.message


def test_outside_a_replica_nothing_changes():
    """Serve's default logger (stderr only, set up when ray.serve is imported) is no replica's: left alone."""
    import ray.serve  # noqa: F401

    before = logging.getLogger("tessera.serve").propagate
    assert errors.log_through_serve() is False
    assert logging.getLogger("tessera.serve").propagate == before
