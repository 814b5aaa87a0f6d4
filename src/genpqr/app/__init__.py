"""The ``genpqr`` command: the top floor of the package; nothing in the library imports it.

:mod:`~genpqr.app.cli`
    The entry point (``genpqr fit | counterfactual | experiment | report | demo``).
:mod:`~genpqr.app.config`
    :class:`~genpqr.app.config.FitConfig`: flags or a JSON config, parsed and checked.
:mod:`~genpqr.app.workflow`, :mod:`~genpqr.app.fit_continuous`, :mod:`~genpqr.app.stream`,
:mod:`~genpqr.app.structural`
    ``genpqr fit`` for discrete actions, continuous actions, Parquet folders out of core, and
    its structural-estimation step.
:mod:`~genpqr.app.report`, :mod:`~genpqr.app.report_continuous`
    The self-contained HTML report.
:mod:`~genpqr.app.counterfactual`
    ``genpqr counterfactual FIT_DIR``.
:mod:`~genpqr.app.demo`
    ``genpqr demo`` (``make demo``).
"""
