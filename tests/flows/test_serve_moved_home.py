"""``tessera serve --config FILE`` with a config printed before the home was moved (``tessera serve --print-config``
writes ``TESSERA_HOME`` into each application's ``runtime_env``, and the config's value wins): the service ran on the
old home (its task store, indices, uploads; made again, empty, where it had been removed) while the start checks
opened and locked the task store of this shell's home, so a second service on the old store was not refused and
nothing said which home served. Now the checks and the lock are the application's store's, and a warning names
both homes. Real SQLite stores and lock files; the command through ``flows.commands.main``, Serve's start replaced
by a failure (``serve_in_process``)."""

from __future__ import annotations

import pytest
import yaml

from tests.flows.test_serve_start_checks import serve_in_process, small_config  # noqa: F401 (fixtures)


pytestmark = pytest.mark.process  # --print-config checks the app's args in a child process (serve.check_args)


def config_of_home(path, home) -> None:
    """Set ``TESSERA_HOME`` in the config's application, as ``--print-config`` writes it."""
    config = yaml.safe_load(path.read_text())
    config["applications"][0]["runtime_env"] = {"env_vars": {"TESSERA_HOME": str(home)}}
    path.write_text(yaml.safe_dump(config))


def test_the_task_store_a_config_home_names_is_the_one_checked_and_locked(small_config, tmp_path,  # noqa: F811
                                                                          serve_in_process):  # noqa: F811
    old = tmp_path / "old-home"
    old.mkdir()
    config = small_config()
    config_of_home(config, old)
    with open(old / "tasks.db.serve.lock", "a+") as held:  # a service still running on the old home
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        done = serve_in_process("--config", str(config), tmp_path=tmp_path)  # this shell: TESSERA_HOME=tmp/home
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (f"tessera serve: warning: application 'tessera' sets TESSERA_HOME={old} in its runtime_env; "
                        "the service reads and writes there (task store, indices, uploads), not in this shell's "
                        f"TESSERA_HOME={tmp_path / 'home'}: remove that line from the config to use "
                        f"{tmp_path / 'home'}")
    assert lines[1].startswith(f"tessera: error: field 'args.service.task_store': the task store {old}/tasks.db is "
                               "in use by another tessera serve (pid 4242)"), done.stderr
    assert not (tmp_path / "home" / "tasks.db").exists()  # the shell's home's store was never the service's


def test_a_config_home_is_said_only_when_it_is_not_the_one_meant(small_config, tmp_path,  # noqa: F811
                                                                 serve_in_process):  # noqa: F811
    config = small_config()
    config_of_home(config, tmp_path / "home")  # the shell's own: nothing to say
    done = serve_in_process("--config", str(config), "--print-config", tmp_path=tmp_path)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    config_of_home(config, tmp_path / "srv")  # set on purpose, the shell setting none: taken as meant
    (tmp_path / "srv").mkdir()
    done = serve_in_process("--config", str(config), "--print-config", tmp_path=tmp_path, TESSERA_HOME="")
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    config_of_home(config, tmp_path / "removed")  # a home that is gone: made again, empty, by the service
    done = serve_in_process("--config", str(config), "--print-config", tmp_path=tmp_path, TESSERA_HOME="")
    assert done.returncode == 0, done.stderr
    assert f"sets TESSERA_HOME={tmp_path / 'removed'} in its runtime_env (not there: the service will make it, " \
           "empty)" in done.stderr
    assert yaml.safe_load(done.stdout)["applications"][0]["runtime_env"]["env_vars"]["TESSERA_HOME"] == \
        str(tmp_path / "removed")  # the config still wins: what it runs is as before
