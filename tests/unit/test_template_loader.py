"""canvas_local.template reads a SAM template as the embedded stack needs it: CloudFormation tags,
intrinsic functions with local names, DefinitionSubstitutions, environments, routes, and lazy handlers."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from canvas_local.template import Template, TemplateError

pytestmark = pytest.mark.unit

TEMPLATE = """
Parameters:
  Stage:
    Type: String
    Default: dev
  Provider:
    Type: String
    Default: bedrock
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
Globals:
  Function:
    Handler: app.handler
    Timeout: 29
    Environment:
      Variables:
        RUNS_TABLE_NAME: !Ref RunsTable
        ARTIFACTS_BUCKET_NAME: !Ref ArtifactsBucket
        MODEL_PROVIDER: !Ref Provider
        ONLY_IN_PROD: !If [IsProd, "yes", !Ref AWS::NoValue]
        LABEL: !Sub "${AWS::StackName}-${Stage}"
        JOINED: !Join ["/", [a, !Ref Stage]]
Resources:
  RunsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      TableName: ignored-physical-name
      AttributeDefinitions:
        - {AttributeName: run_id, AttributeType: S}
        - {AttributeName: account_id, AttributeType: S}
      KeySchema:
        - {AttributeName: run_id, KeyType: HASH}
      GlobalSecondaryIndexes:
        - IndexName: by-account
          KeySchema:
            - {AttributeName: account_id, KeyType: HASH}
          Projection: {ProjectionType: ALL}
          ProvisionedThroughput: {ReadCapacityUnits: 1, WriteCapacityUnits: 1}
      TimeToLiveSpecification: {AttributeName: expires_at, Enabled: true}
  ArtifactsBucket:
    Type: AWS::S3::Bucket
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: !Ref Stage
      BinaryMediaTypes: [multipart~1form-data, image~1png]
  FirstFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/first/
      MemorySize: 1024
      Environment:
        Variables:
          STATE_MACHINE_ARN: !Ref Machine
      Events:
        Get:
          Type: Api
          Properties: {RestApiId: !Ref Api, Method: get, Path: "/v1/run/{run_id}"}
        Queued:
          Type: SQS
          Properties: {Queue: !GetAtt Jobs.Arn, BatchSize: 5}
  Jobs:
    Type: AWS::SQS::Queue
  SecondFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/second/
  Machine:
    Type: AWS::Serverless::StateMachine
    Properties:
      DefinitionUri: machine.asl.json
      DefinitionSubstitutions:
        FirstFunctionArn: !GetAtt FirstFunction.Arn
        TableName: !Ref RunsTable
"""

ASL = {
    "StartAt": "First",
    "States": {
        "First": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": "${FirstFunctionArn}", "Payload": {"table": "${TableName}"}},
            "End": True,
        }
    },
}


@pytest.fixture
def template_dir(tmp_path: Path) -> Path:
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    (tmp_path / "machine.asl.json").write_text(json.dumps(ASL))
    for name in ("first", "second"):
        folder = tmp_path / "functions" / name
        folder.mkdir(parents=True)
        (folder / "app.py").write_text(f"def handler(event, context):\n    return {{'from': '{name}'}}\n")
    return tmp_path


@pytest.fixture
def template(template_dir: Path) -> Template:
    return Template(template_dir / "template.yaml")


def test_tables_are_created_on_demand_under_their_logical_id(template):
    # Given a table with a provisioned GSI and a TTL
    # When the stack reads its tables
    (table,) = template.tables()

    # Then CreateTable gets the keys and index, on demand, named after the logical id
    assert table.create_table == {
        "TableName": "RunsTable",
        "KeySchema": [{"AttributeName": "run_id", "KeyType": "HASH"}],
        "AttributeDefinitions": [
            {"AttributeName": "run_id", "AttributeType": "S"},
            {"AttributeName": "account_id", "AttributeType": "S"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [
            {
                "IndexName": "by-account",
                "KeySchema": [{"AttributeName": "account_id", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    }
    assert table.ttl_attribute == "expires_at"
    assert template.buckets() == ["artifacts-bucket"]


def test_the_environment_merges_globals_and_resolves_intrinsics(template):
    # Given Globals variables with !Ref, !If/AWS::NoValue, !Sub, !Join, and a function's own variable
    # When the first function's environment is read
    environment = template.function_environment("FirstFunction")

    # Then every value is a local name or a parameter default, and NoValue dropped its variable
    assert environment == {
        "RUNS_TABLE_NAME": "RunsTable",
        "ARTIFACTS_BUCKET_NAME": "artifacts-bucket",
        "MODEL_PROVIDER": "bedrock",
        "LABEL": "canvas-local-dev",
        "JOINED": "a/dev",
        "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:Machine",
    }


def test_parameter_overrides_change_conditions_and_values(template_dir):
    # Given the template read for the prod stage
    template = Template(template_dir / "template.yaml", parameter_overrides={"Stage": "prod"})

    # When the environment and stage are read
    environment = template.function_environment("SecondFunction")

    # Then the condition holds and the stage follows the parameter
    assert environment["ONLY_IN_PROD"] == "yes"
    assert template.stage_name() == "prod"


def test_the_state_machine_definition_gets_its_substitutions(template):
    # Given DefinitionSubstitutions from !GetAtt of a function and !Ref of a table
    # When the state machine is read
    (machine,) = template.state_machines()

    # Then the placeholders hold the fake Lambda ARN and the table name
    task = json.loads(machine.definition)["States"]["First"]["Parameters"]
    assert task == {
        "FunctionName": "arn:aws:lambda:us-east-1:123456789012:function:FirstFunction",
        "Payload": {"table": "RunsTable"},
    }
    assert machine.arn == "arn:aws:states:us-east-1:123456789012:stateMachine:Machine"


def test_a_function_is_named_by_its_function_name_when_its_entry_gives_one(template_dir):
    # Given a function named by FunctionName, whose ARN the state machine is handed
    text = (template_dir / "template.yaml").read_text()
    text = text.replace(
        "      CodeUri: functions/first/\n",
        "      FunctionName: !Sub ${AWS::StackName}_First\n      CodeUri: functions/first/\n",
    )
    (template_dir / "template.yaml").write_text(text)
    template = Template(template_dir / "template.yaml")

    # When the stack reads it
    first, second = template.functions()
    (machine,) = template.state_machines()

    # Then Ref and GetAtt give that name, as Lambda would, and a function without one keeps its logical id
    assert (first.function_name, second.function_name) == ("canvas-local_First", None)
    assert (template.ref("FirstFunction"), template.ref("SecondFunction")) == ("canvas-local_First", "SecondFunction")
    task = json.loads(machine.definition)["States"]["First"]["Parameters"]
    assert task["FunctionName"] == "arn:aws:lambda:us-east-1:123456789012:function:canvas-local_First"


def test_a_placeholder_without_substitution_is_an_error(template_dir):
    # Given an ASL placeholder the template does not substitute
    asl = json.dumps(ASL).replace("${TableName}", "${MissingName}")
    (template_dir / "machine.asl.json").write_text(asl)

    # When the state machine is read
    # Then the stack refuses to start with it
    with pytest.raises(TemplateError, match="MissingName"):
        Template(template_dir / "template.yaml").state_machines()


def test_functions_carry_settings_routes_and_the_api_settings(template):
    # Given functions with Globals and their own settings, one with an Api and an SQS event
    # When the functions are read
    first, second = template.functions()

    # Then own settings win over Globals, and only Api events become routes
    assert (first.handler, first.timeout_seconds, first.memory_mb) == ("app.handler", 29, 1024)
    assert (second.timeout_seconds, second.memory_mb) == (29, 128)
    assert [(r.method, r.path, r.function) for r in template.routes()] == [("GET", "/v1/run/{run_id}", "FirstFunction")]
    assert template.binary_media_types() == ["image/png", "multipart/form-data"]


def test_handlers_named_app_py_load_lazily_under_their_own_module_names(template):
    # Given two functions whose handlers both live in app.py
    functions = {spec.logical_id: spec.local_function() for spec in template.functions()}

    def loaded(function: str) -> list[str]:
        return [name for name in sys.modules if name.startswith(f"canvas_fn_{function}_")]

    before_first, before_second = loaded("FirstFunction"), loaded("SecondFunction")

    # When only the first is called
    first_result = functions["FirstFunction"].call({})

    # Then it ran its own file, and the second is not imported yet
    assert first_result == {"from": "first"}
    assert len(loaded("FirstFunction")) == len(before_first) + 1
    assert loaded("SecondFunction") == before_second
    assert functions["SecondFunction"].call({}) == {"from": "second"}


def test_cloudformation_tags_read_as_their_long_forms(tmp_path):
    # Given every short form the loader must read
    (tmp_path / "t.yaml").write_text(
        textwrap.dedent("""
        Resources: {}
        Outputs:
          A: !Ref X
          B: !GetAtt Y.Arn
          C: !Sub "${X}"
          D: !Select [0, !Split [",", "a,b"]]
        """)
    )

    # When it is loaded
    outputs = Template(tmp_path / "t.yaml").document["Outputs"]

    # Then each tag is the intrinsic function CloudFormation's JSON form would hold
    assert outputs == {
        "A": {"Ref": "X"},
        "B": {"Fn::GetAtt": ["Y", "Arn"]},
        "C": {"Fn::Sub": "${X}"},
        "D": {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]},
    }


def test_the_errors_a_catch_names_are_read_per_function_and_states_all_is_not_one():
    # Given the project's template, whose Plan Canvas catches ReviewRequested by name and everything with States.ALL
    project = Template(Path(__file__).resolve().parents[2] / "template.yaml")

    # When the state machines say which errors each function's Catch names
    caught = {name: errors for machine in project.state_machines() for name, errors in machine.caught_by_name().items()}

    # Then Plan Canvas's designed outcomes are named, and no function is listed for States.ALL alone
    assert caught == {"PlanCanvasFunction": frozenset({"ReviewRequested", "RunCancelled"})}
