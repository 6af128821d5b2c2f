"""The phases of `harness run`, in order, each a module with typed inputs and outputs (run.py calls them):

1. `preflight.py`: every check that can fail for every instance, before anything is written (`Checked`);
2. `record.py`: under the output dir's lock, run.json checked and written, and the selection's files (`Recorded`);
3. `resume.py`: output.jsonl put right, leftovers reaped, what is still to run (`Todo`);
4. `services.py`: the run-scoped web services (the offline site, the web proxy, the site search's index: `Services`);
5. `workers.py`: the instances run (runner/evaluate.py), with the warm pool (`Outcome`);
6. `audit.py`: every container of the run gone;
7. `report.py`: the report written and shown, and the exit code.
"""
