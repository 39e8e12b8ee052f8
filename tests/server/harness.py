"""The server tests' keys, and the launcher they share with the benchmark."""

from bench.server_process import ServerProcess, metric, start_server

STUDENT_KEYS = ("student-1", "student-2", "student-3")
TEACHER_KEY = "teacher-key"

__all__ = ["STUDENT_KEYS", "TEACHER_KEY", "ServerProcess", "metric", "start_server"]
