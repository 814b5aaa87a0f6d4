"""The ``genpqr`` command: the top floor of the package; nothing in the library imports it.

:mod:`~genpqr.app.cli`
    The entry point (``genpqr fit | counterfactual | experiment | report | demo``).
:mod:`~genpqr.app.options`, :mod:`~genpqr.app.config`
    Each option declared once (:class:`~genpqr.app.options.Option`); from the declarations the
    flags, :class:`~genpqr.app.config.FitConfig` (flags or a JSON config, parsed and checked) and
    the flag a library message's parameter is named by.
:mod:`~genpqr.app.build`
    :func:`~genpqr.app.build.build_estimator`: the one place an estimator is built from a config,
    for every kind of fit, from the names the config parsed (:mod:`genpqr.registry`).
:mod:`~genpqr.app.fit_parser`, :mod:`~genpqr.app.workflow`
    ``genpqr fit``: its flags (a light module: ``--help`` imports no library) and
    :func:`~genpqr.app.workflow.run_fit`, which hands continuous
    actions to :mod:`~genpqr.app.fit_continuous` and Parquet folders (out of core) to
    :mod:`~genpqr.app.stream`.
The steps of ``genpqr fit``
    Reading and checking the data file (:mod:`~genpqr.app.data_file`), tabular states and
    normalizations (:mod:`~genpqr.app.states`), the transition model chosen from the data
    (:mod:`~genpqr.app.transition_choice`), bootstrap and output tables (:mod:`~genpqr.app.results`),
    writing the output folder (:mod:`~genpqr.app.outputs`), and the structural-estimation step
    (``--features``, :mod:`~genpqr.app.structural`).
:mod:`~genpqr.app.report`, :mod:`~genpqr.app.report_continuous`, :mod:`~genpqr.app.report_base`
    The self-contained HTML report, rendered from the Jinja2 templates in ``templates/``.
:mod:`~genpqr.app.counterfactual`
    ``genpqr counterfactual FIT_DIR``.
:mod:`~genpqr.app.demo`
    ``genpqr demo`` (``make demo``).

Imports go one way: ``cli -> fit_parser -> workflow`` (the last when the command runs), then
``workflow -> fit_continuous / stream -> outputs -> report -> report_continuous / structural ->
report_base``, with ``build -> config -> options`` at the bottom.
"""
