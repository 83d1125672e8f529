//! The serialized shape of a [`Block`]: an object with exactly one kind key beside the
//! common keys. Every key is known, so a misspelt one is an error, never ignored.

use super::*;

/// A block as written in a file. Kept separate from [`Block`] so that the IR can be an
/// enum while the file shape stays a flat object with strict keys.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Block",
    description = "A step: exactly one kind key (llm, code, handler, action, approval, wait, passthrough, transform, sequence, parallel, map, loop, branch, graph, subflow) plus optional common keys."
)]
pub(super) struct BlockDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    llm: Option<LlmSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    embed: Option<EmbedSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<CodeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    handler: Option<HandlerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    action: Option<ActionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<ApprovalSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait: Option<WaitSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    passthrough: Option<PassthroughSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transform: Option<TransformSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sequence: Option<Vec<Block>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parallel: Option<ParallelSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    map: Option<MapSpec>,
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    loop_: Option<LoopSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    branch: Option<BranchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    graph: Option<GraphSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subflow: Option<SubFlowSpec>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<Retry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rescue: Vec<Rescue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    assert: Vec<Assertion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stall: Option<Stall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_unknown_outcome: Option<UnknownOutcome>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<ValueTemplate>,
    #[serde(default, skip_serializing_if = "is_false")]
    merge_output: bool,
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    set: IndexMap<String, ValueTemplate>,
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    bind: IndexMap<String, ValueTemplate>,
    /// A `message` event emitted after the block ran (`output` and `exit` in scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    emit: Option<ValueTemplate>,
    /// A `message` event emitted when the block starts (`input` and `state` in scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    announce: Option<ValueTemplate>,
}

impl TryFrom<BlockDoc> for Block {
    type Error = String;

    fn try_from(d: BlockDoc) -> Result<Block, String> {
        let mut kinds: Vec<BlockKind> = Vec::with_capacity(1);
        if let Some(s) = d.llm {
            kinds.push(BlockKind::Llm(s));
        }
        if let Some(s) = d.embed {
            kinds.push(BlockKind::Embed(s));
        }
        if let Some(s) = d.code {
            kinds.push(BlockKind::Code(s));
        }
        if let Some(s) = d.handler {
            kinds.push(BlockKind::Handler(s));
        }
        if let Some(s) = d.action {
            kinds.push(BlockKind::Action(s));
        }
        if let Some(s) = d.approval {
            kinds.push(BlockKind::Approval(s));
        }
        if let Some(s) = d.wait {
            kinds.push(BlockKind::Wait(s));
        }
        if d.passthrough.is_some() {
            kinds.push(BlockKind::Passthrough);
        }
        if let Some(s) = d.transform {
            kinds.push(BlockKind::Transform(s));
        }
        if let Some(s) = d.sequence {
            kinds.push(BlockKind::Sequence(s));
        }
        if let Some(s) = d.parallel {
            kinds.push(BlockKind::Parallel(s));
        }
        if let Some(s) = d.map {
            kinds.push(BlockKind::Map(s));
        }
        if let Some(s) = d.loop_ {
            kinds.push(BlockKind::Loop(s));
        }
        if let Some(s) = d.branch {
            kinds.push(BlockKind::Branch(s));
        }
        if let Some(s) = d.graph {
            kinds.push(BlockKind::Graph(s));
        }
        if let Some(s) = d.subflow {
            kinds.push(BlockKind::SubFlow(s));
        }
        let kind = match kinds.len() {
            1 => kinds.pop().expect("one kind"),
            0 => {
                return Err(format!(
                    "a block needs exactly one kind key, one of: {} (an empty passthrough is written `passthrough: {{}}`)",
                    BlockKind::NAMES.join(", ")
                ));
            }
            _ => {
                let names: Vec<&str> = kinds.iter().map(BlockKind::name).collect();
                return Err(format!(
                    "a block has exactly one kind, but this one has {}; split it into a sequence of blocks",
                    names.join(" and ")
                ));
            }
        };
        Ok(Block {
            id: d.id,
            name: d.name,
            description: d.description,
            kind,
            policy: Policy {
                retry: d.retry,
                timeout_ms: d.timeout_ms,
                rescue: d.rescue,
                budget: d.budget,
                assert: d.assert,
                stall: d.stall,
                on_unknown_outcome: d.on_unknown_outcome,
            },
            data: DataFlow {
                input: d.input,
                merge_output: d.merge_output,
                set: d.set,
                bind: d.bind,
                emit: d.emit,
                announce: d.announce,
            },
            origin: None,
        })
    }
}

impl Serialize for Block {
    /// The shape of [`BlockDoc`], written from borrowed parts: going through an owned
    /// `BlockDoc` cloned each block's whole subtree at every level (a fifth of a
    /// 1,000-node flow's validation went to it, for the content hash).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (p, d) = (&self.policy, &self.data);
        let mut m = s.serialize_map(None)?;
        if let Some(v) = &self.id {
            m.serialize_entry("id", v)?;
        }
        if let Some(v) = &self.name {
            m.serialize_entry("name", v)?;
        }
        if let Some(v) = &self.description {
            m.serialize_entry("description", v)?;
        }
        let key = self.kind.name();
        match &self.kind {
            BlockKind::Llm(v) => m.serialize_entry(key, v)?,
            BlockKind::Embed(v) => m.serialize_entry(key, v)?,
            BlockKind::Code(v) => m.serialize_entry(key, v)?,
            BlockKind::Handler(v) => m.serialize_entry(key, v)?,
            BlockKind::Action(v) => m.serialize_entry(key, v)?,
            BlockKind::Approval(v) => m.serialize_entry(key, v)?,
            BlockKind::Wait(v) => m.serialize_entry(key, v)?,
            BlockKind::Passthrough => m.serialize_entry(key, &PassthroughSpec {})?,
            BlockKind::Transform(v) => m.serialize_entry(key, v)?,
            BlockKind::Sequence(v) => m.serialize_entry(key, v)?,
            BlockKind::Parallel(v) => m.serialize_entry(key, v)?,
            BlockKind::Map(v) => m.serialize_entry(key, v)?,
            BlockKind::Loop(v) => m.serialize_entry(key, v)?,
            BlockKind::Branch(v) => m.serialize_entry(key, v)?,
            BlockKind::Graph(v) => m.serialize_entry(key, v)?,
            BlockKind::SubFlow(v) => m.serialize_entry(key, v)?,
        }
        if let Some(v) = &p.retry {
            m.serialize_entry("retry", v)?;
        }
        if let Some(v) = &p.timeout_ms {
            m.serialize_entry("timeout_ms", v)?;
        }
        if !p.rescue.is_empty() {
            m.serialize_entry("rescue", &p.rescue)?;
        }
        if let Some(v) = &p.budget {
            m.serialize_entry("budget", v)?;
        }
        if !p.assert.is_empty() {
            m.serialize_entry("assert", &p.assert)?;
        }
        if let Some(v) = &p.stall {
            m.serialize_entry("stall", v)?;
        }
        if let Some(v) = &p.on_unknown_outcome {
            m.serialize_entry("on_unknown_outcome", v)?;
        }
        if let Some(v) = &d.input {
            m.serialize_entry("input", v)?;
        }
        if d.merge_output {
            m.serialize_entry("merge_output", &true)?;
        }
        if !d.set.is_empty() {
            m.serialize_entry("set", &d.set)?;
        }
        if !d.bind.is_empty() {
            m.serialize_entry("bind", &d.bind)?;
        }
        if let Some(v) = &d.emit {
            m.serialize_entry("emit", v)?;
        }
        if let Some(v) = &d.announce {
            m.serialize_entry("announce", v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Block, D::Error> {
        let doc = BlockDoc::deserialize(d)?;
        Block::try_from(doc).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Block {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Block".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        BlockDoc::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The owned document of a block, as the derived `Serialize` of [`BlockDoc`]
    /// writes it: what the borrowed serializer must agree with, key order included.
    fn owned(b: &Block) -> BlockDoc {
        let mut d = BlockDoc {
            id: b.id.clone(),
            name: b.name.clone(),
            description: b.description.clone(),
            retry: b.policy.retry.clone(),
            timeout_ms: b.policy.timeout_ms,
            rescue: b.policy.rescue.clone(),
            budget: b.policy.budget.clone(),
            assert: b.policy.assert.clone(),
            stall: b.policy.stall,
            on_unknown_outcome: b.policy.on_unknown_outcome,
            input: b.data.input.clone(),
            merge_output: b.data.merge_output,
            set: b.data.set.clone(),
            bind: b.data.bind.clone(),
            emit: b.data.emit.clone(),
            announce: b.data.announce.clone(),
            ..BlockDoc::default()
        };
        match &b.kind {
            BlockKind::Llm(s) => d.llm = Some(s.clone()),
            BlockKind::Embed(s) => d.embed = Some(s.clone()),
            BlockKind::Code(s) => d.code = Some(s.clone()),
            BlockKind::Handler(s) => d.handler = Some(s.clone()),
            BlockKind::Action(s) => d.action = Some(s.clone()),
            BlockKind::Approval(s) => d.approval = Some(s.clone()),
            BlockKind::Wait(s) => d.wait = Some(s.clone()),
            BlockKind::Passthrough => d.passthrough = Some(PassthroughSpec {}),
            BlockKind::Transform(s) => d.transform = Some(s.clone()),
            BlockKind::Sequence(s) => d.sequence = Some(s.clone()),
            BlockKind::Parallel(s) => d.parallel = Some(s.clone()),
            BlockKind::Map(s) => d.map = Some(s.clone()),
            BlockKind::Loop(s) => d.loop_ = Some(s.clone()),
            BlockKind::Branch(s) => d.branch = Some(s.clone()),
            BlockKind::Graph(s) => d.graph = Some(s.clone()),
            BlockKind::SubFlow(s) => d.subflow = Some(s.clone()),
        }
        d
    }

    #[test]
    fn a_block_serializes_as_its_document_does() {
        let flow = serde_json::json!({
            "id": "root", "name": "Root", "description": "all keys",
            "sequence": [
                {"id": "a", "llm": {"model": "m", "prompt": "{{ input }}"},
                 "retry": {"attempts": 2}, "timeout_ms": 5, "budget": {"tokens": 9},
                 "rescue": [{"then": {"passthrough": {}}}],
                 "input": "{{ state }}", "merge_output": true,
                 "set": {"x": "{{ output }}"}, "bind": {"y": "1"}, "emit": "done"},
                {"id": "b", "code": {"language": "lua", "source": "return 1"}},
                {"id": "c", "transform": {"output": {"k": "{{ input.k }}"}}},
                {"id": "d", "map": {"items": "{{ input.xs }}", "body": {"passthrough": {}}}},
                {"id": "e", "loop": {"body": {"passthrough": {}}, "until": "true", "max_iterations": 3}},
                {"id": "f", "parallel": {"branches": {"p": {"passthrough": {}}}}}
            ]
        });
        let block: Block = serde_json::from_value(flow).expect("a block");
        let mine = serde_json::to_string(&block).unwrap();
        let derived = serde_json::to_string(&owned(&block)).unwrap();
        assert_eq!(mine, derived);
        let back: Block = serde_json::from_str(&mine).unwrap();
        assert_eq!(back, block);
    }
}
