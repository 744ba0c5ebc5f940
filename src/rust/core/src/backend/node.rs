//! A graph node as a backend sees it: the op, and for every source and the
//! result the buffer, byte offset and layout (views already resolved to their
//! base buffer, offset and strides).

use crate::op::Op;
use crate::tensor::{DataRef, Tensor};
use std::sync::Arc;

/// One node as a backend sees it.
#[derive(Debug, Clone)]
pub struct Node {
    pub op: Op,
    pub srcs: Vec<DataRef>,
    pub dst: DataRef,
    /// The tensor computed, for messages.
    pub tensor: Arc<Tensor>,
}
