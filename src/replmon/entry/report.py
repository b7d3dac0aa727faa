"""Lambda entry point of report: report_step of replmon.probe.steps (template.yaml's functions/report.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import report_step

handler = lambda_handler(report_step)
