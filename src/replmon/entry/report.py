"""Lambda entry point of report: report_step of replmon.service (template.yaml's functions/report.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import report_step

handler = lambda_handler(report_step)
