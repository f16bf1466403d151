"""canvas_local.template resolves Fn::If for the checks of template.yaml: checkov reads the properties a stack
deployed with the parameters' defaults gets, not a property that is there only under some condition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from canvas_local.template import TemplateError, UnsupportedTemplateError, main, resolve_conditions

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

DOCUMENT: dict[str, Any] = {
    "Parameters": {
        "Reserved": {"Type": "Number", "Default": 0},
        "Logging": {"Type": "String", "Default": "off"},
        "Email": {"Type": "String", "Default": ""},
    },
    "Conditions": {
        "HasReserved": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Reserved"}, 0]}]},
        "HasLogging": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Logging"}, "off"]}]},
        "HasEmail": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Email"}, ""]}]},
        "Either": {"Fn::Or": [{"Condition": "HasLogging"}, {"Condition": "HasEmail"}]},
        "Both": {"Fn::And": [{"Condition": "HasLogging"}, {"Condition": "HasEmail"}]},
    },
    "Resources": {
        "Function": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "ReservedConcurrentExecutions": {
                    "Fn::If": ["HasReserved", {"Ref": "Reserved"}, {"Ref": "AWS::NoValue"}]
                },
                "Policies": [
                    "AWSXRayDaemonWriteAccess",
                    {"Fn::If": ["Either", "CloudWatchPutMetricPolicy", {"Ref": "AWS::NoValue"}]},
                ],
                "Level": {"Fn::If": ["Both", "INFO", {"Fn::If": ["HasLogging", "ERROR", "OFF"]}]},
            },
        },
        "Topic": {"Type": "AWS::SNS::Topic", "Condition": "HasEmail", "Properties": {"TopicName": "alarms"}},
    },
}


def test_each_fn_if_takes_the_branch_of_the_parameters_defaults_and_no_value_drops_the_property():
    # When the document is resolved with its defaults
    resolved = resolve_conditions(DOCUMENT)

    # Then a property under a false condition is gone, as on a deployed stack, and so is a list item
    properties = resolved["Resources"]["Function"]["Properties"]
    assert "ReservedConcurrentExecutions" not in properties
    assert properties["Policies"] == ["AWSXRayDaemonWriteAccess"]
    # And nested Fn::If and conditions naming conditions are evaluated
    assert properties["Level"] == "OFF"
    # And a resource keeps its Condition (checked whether or not it is created), as do the sections conditions read
    assert resolved["Resources"]["Topic"] == DOCUMENT["Resources"]["Topic"]
    assert resolved["Conditions"] == DOCUMENT["Conditions"]
    assert resolved["Parameters"] == DOCUMENT["Parameters"]


def test_overrides_take_the_other_branches():
    # When the document is resolved with parameters that turn the conditions true
    resolved = resolve_conditions(DOCUMENT, {"Reserved": "10", "Logging": "on", "Email": "ops@example.com"})

    # Then the properties under them are there, other intrinsics kept as they are
    properties = resolved["Resources"]["Function"]["Properties"]
    assert properties["ReservedConcurrentExecutions"] == {"Ref": "Reserved"}
    assert properties["Policies"] == ["AWSXRayDaemonWriteAccess", "CloudWatchPutMetricPolicy"]
    assert properties["Level"] == "INFO"


def test_a_condition_it_cannot_evaluate_is_refused_not_guessed():
    # Given a condition that reads a resource, and an Fn::If naming no condition
    reads_a_resource = {**DOCUMENT, "Conditions": {"HasReserved": {"Fn::Equals": [{"Ref": "Function"}, "x"]}}}
    unknown = {**DOCUMENT, "Conditions": {}}

    # Then each is an error naming what it could not evaluate
    with pytest.raises(UnsupportedTemplateError, match="only parameters and literals"):
        resolve_conditions(reads_a_resource)
    with pytest.raises(TemplateError, match="unknown condition HasReserved"):
        resolve_conditions(unknown)


def test_the_command_line_prints_the_template_checkov_reads_with_each_fn_if_resolved(capsys):
    # When the module is run on template.yaml
    main([str(ROOT / "template.yaml")])

    # Then no Fn::If is left for checkov to pass unevaluated
    printed = capsys.readouterr().out
    assert '"Fn::If"' not in printed
    assert json.loads(printed)["Resources"]
