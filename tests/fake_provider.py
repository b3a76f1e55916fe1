"""The old path of the tests' fake provider, kept for the red team's reproducers
(``../shared/fault-cases-t5/y20_batch_out_is_not_a_results_file.py`` imports
``tests.fake_provider``).  The one stub model server is :mod:`bench.openai_stub`;
new code imports it from there."""

from bench.openai_stub import fake_provider, fake_server, send_ok, serve_http

__all__ = ["fake_provider", "fake_server", "send_ok", "serve_http"]
