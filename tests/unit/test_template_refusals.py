"""canvas_local.template refuses what the embedded stack does not stand in for, naming the resource and the
construct, and evaluates resource Conditions as CloudFormation does: a resource whose condition is false is
left out."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from canvas_local.template import Template, TemplateError, UnsupportedTemplateError

pytestmark = pytest.mark.unit

TEMPLATE = """
Parameters:
  Stage:
    Type: String
    Default: dev
  AlarmEmail:
    Type: String
    Default: ""
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
  HasAlarmEmail: !Not [!Equals [!Ref AlarmEmail, ""]]
  IsProdWithAlarms: !And [!Condition IsProd, !Condition HasAlarmEmail]
  IsProdOrAlarmed: !Or [!Condition IsProd, !Condition HasAlarmEmail]
Resources:
  RunsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: run_id, AttributeType: S}]
      KeySchema: [{AttributeName: run_id, KeyType: HASH}]
  AuditTable:
    Type: AWS::DynamoDB::Table
    Condition: IsProd
    Properties:
      AttributeDefinitions: [{AttributeName: id, AttributeType: S}]
      KeySchema: [{AttributeName: id, KeyType: HASH}]
  AlarmTopic:
    Type: AWS::SNS::Topic
  ProdQueue:
    Type: AWS::SQS::Queue
    Condition: IsProdWithAlarms
  AnyQueue:
    Type: AWS::SQS::Queue
    Condition: IsProdOrAlarmed
"""


def template_of(tmp_path: Path, text: str = TEMPLATE, **overrides: str) -> Template:
    path = tmp_path / "template.yaml"
    path.write_text(textwrap.dedent(text))
    return Template(path, parameter_overrides=overrides)


# ---- Ref and Fn::GetAtt of what the stack does not create


def test_a_ref_to_a_resource_type_the_stack_does_not_create_is_refused(tmp_path):
    # Given a template with an SNS topic, which the embedded stack does not create
    template = template_of(tmp_path)

    # When a value refers to the topic
    # Then the template is refused, naming the type, the resource and the construct
    with pytest.raises(UnsupportedTemplateError) as refused:
        template.resolve({"TOPIC_ARN": {"Ref": "AlarmTopic"}})
    assert str(refused.value) == (
        "Ref to AWS::SNS::Topic resource 'AlarmTopic' is not supported by the embedded stack (it does not create one)"
    )


def test_an_attribute_the_stack_does_not_know_is_refused(tmp_path):
    # Given a table the stack creates, whose ARN it knows but not its stream's
    template = template_of(tmp_path)

    # When a value asks for the stream's ARN
    # Then the template is refused, naming the attribute and the resource
    with pytest.raises(UnsupportedTemplateError, match=r"^Fn::GetAtt RunsTable\.StreamArn of AWS::DynamoDB::Table"):
        template.resolve({"Fn::GetAtt": ["RunsTable", "StreamArn"]})
    # And its ARN still resolves to the local one
    assert (
        template.resolve({"Fn::GetAtt": ["RunsTable", "Arn"]})
        == "arn:aws:dynamodb:us-east-1:123456789012:table/RunsTable"
    )


def test_an_attribute_in_a_sub_is_refused_as_fn_get_att(tmp_path):
    # Given a Sub that names an attribute of a resource the stack does not create
    template = template_of(tmp_path)

    # When it is resolved
    # Then the refusal names the Fn::GetAtt it stands for
    with pytest.raises(UnsupportedTemplateError, match=r"^Fn::GetAtt AlarmTopic\.TopicName of AWS::SNS::Topic"):
        template.resolve({"Fn::Sub": "topic ${AlarmTopic.TopicName}"})


def test_an_intrinsic_function_the_stack_does_not_evaluate_is_refused(tmp_path):
    # Given a template read by the stack
    template = template_of(tmp_path)

    # When a value uses Fn::Base64
    # Then it is refused by name
    with pytest.raises(UnsupportedTemplateError, match=r"^intrinsic function Fn::Base64 is not supported"):
        template.resolve({"Fn::Base64": "text"})


def test_a_pseudo_parameter_the_stack_does_not_fill_is_refused(tmp_path):
    # Given a template read by the stack
    template = template_of(tmp_path)

    # When a value refers to AWS::NotificationARNs
    # Then it is refused by name
    with pytest.raises(UnsupportedTemplateError, match=r"^Ref to pseudo parameter AWS::NotificationARNs"):
        template.resolve({"Ref": "AWS::NotificationARNs"})


def test_a_ref_to_a_name_that_is_neither_resource_nor_parameter_is_an_error(tmp_path):
    # Given a template without a resource called Missing
    template = template_of(tmp_path)

    # When a value refers to it
    # Then the error names the construct and the missing name
    with pytest.raises(TemplateError, match=r"^Ref to 'Missing': no resource or parameter 'Missing'$"):
        template.resolve({"Ref": "Missing"})


# ---- resource Conditions


def test_a_resource_whose_condition_is_false_is_left_out(tmp_path):
    # Given a table under IsProd, read with the parameters' defaults (Stage dev)
    template = template_of(tmp_path)

    # When the stack reads its tables
    tables = [table.name for table in template.tables()]

    # Then the table whose condition is false is not created, and the record says why
    assert tables == ["RunsTable"]
    assert template.left_out["AuditTable"] == "IsProd"


def test_a_resource_whose_condition_holds_is_created(tmp_path):
    # Given the same template read for the prod stage
    template = template_of(tmp_path, Stage="prod")

    # When the stack reads its tables
    tables = [table.name for table in template.tables()]

    # Then the conditional table is there
    assert tables == ["RunsTable", "AuditTable"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, set()),
        ({"Stage": "prod"}, {"AnyQueue"}),
        ({"AlarmEmail": "ops@example.com"}, {"AnyQueue"}),
        ({"Stage": "prod", "AlarmEmail": "ops@example.com"}, {"AnyQueue", "ProdQueue"}),
    ],
)
def test_conditions_combine_with_and_or_not_and_equals(tmp_path, overrides, expected):
    # Given queues under Fn::And and Fn::Or of conditions over parameters
    template = template_of(tmp_path, **overrides)

    # When the stack reads its queues
    queues = set(template.of_type("AWS::SQS::Queue"))

    # Then exactly those whose condition holds are there
    assert queues == expected


def test_a_ref_to_a_resource_left_out_is_an_error_naming_its_condition(tmp_path):
    # Given the table under IsProd, left out in dev
    template = template_of(tmp_path)

    # When a value refers to it outside an Fn::If
    # Then the error names the resource and the condition that left it out
    with pytest.raises(
        TemplateError, match=r"^Ref to 'AuditTable': resource 'AuditTable' is left out \(its Condition 'IsProd'"
    ):
        template.resolve({"Ref": "AuditTable"})
    # And behind an Fn::If on the same condition it is never read
    assert template.resolve({"Fn::If": ["IsProd", {"Ref": "AuditTable"}, "none"]}) == "none"


def test_a_resource_condition_that_is_not_defined_is_an_error_naming_the_resource(tmp_path):
    # Given a resource under a condition the Conditions section does not define
    text = TEMPLATE.replace("Condition: IsProd\n", "Condition: IsStaging\n")

    # When the template is read
    # Then the error names the condition and the resource
    with pytest.raises(TemplateError, match=r"^Condition 'IsStaging' on resource 'AuditTable': unknown condition"):
        template_of(tmp_path, text)


def test_a_resource_condition_using_an_unsupported_function_is_refused(tmp_path):
    # Given a condition with Fn::Contains, which the stack does not evaluate
    text = TEMPLATE.replace("IsProd: !Equals [!Ref Stage, prod]", "IsProd: !Contains [[prod], !Ref Stage]")

    # When the template is read
    # Then it is refused, naming the condition, the resource and the function
    with pytest.raises(
        UnsupportedTemplateError, match=r"^Condition 'IsProd' on resource 'AuditTable': intrinsic function Fn::Contains"
    ):
        template_of(tmp_path, text)


# ---- template.yaml


def test_template_yaml_reads_without_a_refusal_with_its_defaults():
    # Given the service's template with its parameters' defaults
    template = Template(Path(__file__).resolve().parents[2] / "template.yaml")

    # When the stack reads everything it creates
    template.tables(), template.buckets(), template.state_machines(), template.event_rules()
    functions = template.functions()

    # Then nothing is refused, and the resources its conditions leave out by default are left out
    assert functions
    assert {"OpenAIApiKeySecret", "AlarmEmailSubscription"} <= set(template.left_out)


# ---- resource types, properties and events the stack neither builds nor knowingly leaves to AWS


@pytest.mark.parametrize(
    "resource, refused",
    [
        ("  Cluster:\n    Type: AWS::ECS::Cluster\n", "resource 'Cluster': type AWS::ECS::Cluster"),
        (
            "  Jobs:\n    Type: AWS::SQS::Queue\n    Properties: {FifoQueue: true}\n",
            "resource 'Jobs': property FifoQueue of AWS::SQS::Queue",
        ),
        (
            "  Worker:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: f/\n"
            "      Events:\n        Hourly:\n          Type: Schedule\n"
            "          Properties: {Schedule: rate(1 hour)}\n",
            "resource 'Worker': event 'Hourly' of type Schedule",
        ),
        (
            "  Worker:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: f/\n"
            "      Events:\n        Get:\n          Type: Api\n"
            "          Properties: {Method: get, Path: /x, Auth: {ApiKeyRequired: true}}\n",
            "resource 'Worker': property Auth of its Api event 'Get'",
        ),
        (
            "  Worker:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: f/\n"
            "      SnapStart: {ApplyOn: PublishedVersions}\n",
            "resource 'Worker': property SnapStart of AWS::Serverless::Function",
        ),
    ],
)
def test_what_the_stack_neither_builds_nor_leaves_to_aws_is_refused_by_name(tmp_path, resource, refused):
    # Given a template with a construct the stack has not been told what to do with
    # When it is read, Then it is refused, naming the resource and the construct
    with pytest.raises(UnsupportedTemplateError, match=refused):
        template_of(tmp_path, "Resources:\n" + resource)


def test_a_global_function_property_the_stack_does_not_know_is_refused(tmp_path):
    text = "Globals:\n  Function:\n    Runtime: python3.13\n    FileSystemConfigs: []\nResources: {}\n"
    with pytest.raises(UnsupportedTemplateError, match="Globals Function: property FileSystemConfigs"):
        template_of(tmp_path, text)


def test_what_is_left_to_aws_is_read_without_complaint(tmp_path):
    # Given alarms, permissions and logs, which the stack has no use for on one machine, and properties it leaves to AWS
    text = (
        "Resources:\n"
        "  Topic:\n    Type: AWS::SNS::Topic\n"
        "  Logs:\n    Type: AWS::Logs::LogGroup\n    Properties: {RetentionInDays: 7}\n"
        "  Jobs:\n    Type: AWS::SQS::Queue\n    Properties: {SqsManagedSseEnabled: true, VisibilityTimeout: 30}\n"
    )
    # Then the template is read
    assert sorted(template_of(tmp_path, text).resources) == ["Jobs", "Logs", "Topic"]
