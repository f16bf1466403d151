"""Names vulture reports as unused that are used, by a framework, a library or the tests (`make vulture`).

Route functions, exception handlers and pydantic validators and serializers are found by their decorators instead
(`ignore_decorators` under [tool.vulture] in pyproject.toml), so a new route needs no line here.
"""

# ruff: noqa: B018
from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# pydantic: the model configuration, and fields that are only serialized (API bodies, stored items, the viewer).
_.model_config
_.max_webhook_endpoints
_.max_blocks_per_run
_.max_files_per_run
_.credits_balance
_.credits_used_this_month
_.runs_this_month
_.active_runs
_.webhook_url
_.poll_url
_.tasks_completed
_.tasks_total
_.recoverable
_.next_cursor
_.not_completed
_.pending_inputs
_.deleted
_.signed_out
_.attempted
_.node_width
_.node_height
_.awaiting_approval
_.content_truncated
# A run item's attribute written and compared only in DynamoDB expressions (Store.settle_approval, claim_cancel).
_.approval_settled_at_ms

# Standard library callbacks and settings, called or read by the base class: HTMLParser's handlers,
# http.client's connect, http.server's request handlers and server options, WSGI's start_response.
_.handle_data
_.handle_decl
_.handle_endtag
_.handle_startendtag
_.connect
_.do_DELETE
_.do_GET
_.do_HEAD
_.do_OPTIONS
_.do_PATCH
_.do_POST
_.do_PUT
_.log_message
_.protocol_version
_.close_connection
_.daemon_threads
_.request_queue_size
_.multithread
_.exc_info
_.exc_type
_.tb

# python-docx, python-pptx and openpyxl: properties whose setters write the document.
_.alignment
_.rgb
_.author
_.creator
_.space_after
_.space_before
_.line_spacing
_.orientation
_.fitToWidth
_.fitToHeight
_.pageSetUpPr
_.print_title_rows
_.left_indent
_.first_line_indent
_.keep_with_next
_.slide_height
_.word_wrap
_.auto_size
_.categories
_.include_in_layout
_.number_format_is_linked
_.gap_width
_.has_title
_.minimum_scale
_.smooth
_.cat
_.numFmt
_.border
_.quotePrefix
_.number_format
_.freeze_panes

# Powertools: a Logger hook it calls, the Lambda context attributes and cold-start flag it reads, and what its
# resolver reads of canvas_core's (api/app.py): the event it builds, the headers it validates, its validation.
_._get_logger
_.invoked_function_arn
_.function_version
_.get_remaining_time_in_millis
_.is_cold_start
_._to_proxy_event
_.resolved_headers_field
_._request_validation_middleware

# moto: the signature of the Lambda seam the embedded stack replaces, and what patched functions expose.
_.state_credentials
_.__wrapped__
_.all_items

# socketserver: the hook its server calls with each accepted connection (canvas_local/moto_server.py's pool).
_.process_request

# waitress: the classes its server, channel and tasks are built from, and the task state it reads
# (canvas_local/frontdoor.py extends them).
_.channel_class
_.parser_class
_.task_class
_.error_task_class
_.content_length
_.current_outbuf_count
_.total_outbufs_len
_.maintenance

# Read by the tests: what the embedded stack and its Lambda runtime report, test seams of the moto patch, and
# the event handler attributes the HTML check collects.
_.invocations
_.cold_starts
_.of
_.environments
_.served_in_process
_.s3_url
_.lambdas_in_process
_.service_lock
_.backend_locks
_.uninstall_caches
_.handler_attributes

# Used only by the tests.
_.put_run  # adapters/store/runs.py: the tests seed runs with it
_.put_canvas  # adapters/store/canvases.py: the tests seed canvases with it
_.unique_path  # canvas_local/client/downloads.py: only its unit test calls it
_.recording  # canvas_local/iam_calls.py: the e2e tier records the functions' AWS calls with it
_.read_calls  # canvas_local/iam_calls.py: and reads those a `canvas serve` it started recorded
_.bad_inputs  # bench/questions.py: the unit tier asks its awkward tables a question each

# canvas_local/moto_patch/memory.py's DiskBody stands in for moto's `tempfile.SpooledTemporaryFile`: moto builds it
# with a max size, and FakeKey and the io protocol read `closed` and `tell`.
_.SpooledTemporaryFile
_.closed
_.tell
_.max_size

# canvas_local/frontdoor.py's _ChunkedReceiver ends waitress's chunked read the way waitress's own errors do.
_.all_chunks_received

# RunItem's count of credits set aside, written with the run and read from the stored item at its end
# (adapters/store/runs.py, `returned`).
_.credits_set_aside
