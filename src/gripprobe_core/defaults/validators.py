"""Default plugin: the built-in validator kinds (see :mod:`gripprobe_core.validators`)."""

from __future__ import annotations

from typing import Callable

from .. import hookimpl
from ..validators.context import Validator
from ..validators.answer import file_absent, final_answer
from ..validators.command import command_output
from ..validators.files import file_equals, file_exists
from ..validators.patch import patch_applied
from ..validators.weekly_plan import weekly_plan_task
from ..validators.web import web_nonce_proof, web_search_result

#: Kind → validator function, in the order the docs list them.
BUILTIN_VALIDATORS: dict[str, Validator] = {
    "file_equals": file_equals,
    "file_exists": file_exists,
    "file_absent": file_absent,
    "final_answer": final_answer,
    "patch_applied": patch_applied,
    "web_nonce_proof": web_nonce_proof,
    "web_search_result": web_search_result,
    "weekly_plan_task": weekly_plan_task,
    "command_output": command_output,
}


@hookimpl
def register_validators(register: Callable[[str, Validator], None]) -> None:
    for kind, fn in BUILTIN_VALIDATORS.items():
        register(kind, fn)
