"""File formats and safe writes: the only code that turns tables into bytes and back.

- :mod:`pipelines.io.atomic`: atomic file and directory writes (temp file + rename);
- :mod:`pipelines.io.strict_json`: JSON that refuses repeated keys and non-finite numbers;
- :mod:`pipelines.io.csv_sniff`: reading an operator's CSV (separator, decimal comma, header);
- :mod:`pipelines.io.schemas`: the column schemas of every frame that crosses a stage boundary;
- :mod:`pipelines.io.plan_io`, :mod:`pipelines.io.job_io`, :mod:`pipelines.io.trace_io`,
  :mod:`pipelines.io.traffic_io`: the file formats of plans, job histories, traces and traffic;
- :mod:`pipelines.io.run_folder`: the run folder (written whole, then swapped in; the freshness check).
"""
