-- Provider usage per rule, model and UTC day: the calls that got an
-- answer and the tokens those answers reported. Written in the same target
-- transaction as the results they produced, so a crash never counts twice.
CREATE TABLE pgimageai.usage (
  rule              text NOT NULL,
  model             text NOT NULL,
  day               date NOT NULL,
  calls             bigint NOT NULL DEFAULT 0,
  prompt_tokens     bigint NOT NULL DEFAULT 0,
  completion_tokens bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (rule, model, day)
);
