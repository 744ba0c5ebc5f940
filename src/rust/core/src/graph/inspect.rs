//! Looking into graphs: nodes by index, tensors by name, views of a range of
//! nodes, and the graph as text (ggml's `ggml_graph_print`) or as a Graphviz
//! DOT description (`ggml_graph_dump_dot`).

use super::Graph;
use crate::layout::fmt_shape;
use crate::op::codes::op_desc;
use crate::tensor::Tensor;
use std::fmt::Write as _;
use std::sync::Arc;

impl Graph {
    /// Node `i` (0-based; negative counts from the end: -1 is the last).
    pub fn node(&self, i: i64) -> crate::Result<Arc<Tensor>> {
        let n = self.n_nodes() as i64;
        let at = if i < 0 { n + i } else { i };
        anyhow::ensure!(
            (0..n).contains(&at),
            "node {i} does not exist: the graph has {n} node(s), numbered 0 to {} (or -1 to -{n} from the end)",
            n - 1
        );
        // BOUNDS: 0 <= at < n = self.nodes().len(), checked just above.
        Ok(self.nodes()[at as usize].clone())
    }

    /// The node or leaf called `name` (the last node of that name wins, as in ggml).
    pub fn tensor_by_name(&self, name: &str) -> Option<Arc<Tensor>> {
        let hit = |t: &&Arc<Tensor>| t.name() == name;
        self.leafs().iter().find(hit).or_else(|| self.nodes().iter().rev().find(hit)).cloned()
    }

    /// A graph of nodes `i0..i1` (leafs: those the nodes read that are not
    /// among them), as ggml's `ggml_graph_view`.
    pub fn view(&self, i0: usize, i1: usize) -> crate::Result<Graph> {
        anyhow::ensure!(
            i0 <= i1 && i1 <= self.n_nodes(),
            "nodes {i0} to {i1} are not a range of this graph's {} node(s) (0 <= i0 <= i1 <= {})",
            self.n_nodes(),
            self.n_nodes()
        );
        // BOUNDS: i0 <= i1 <= self.n_nodes(), checked just above.
        let nodes: Vec<Arc<Tensor>> = self.nodes()[i0..i1].to_vec();
        let mut leafs: Vec<Arc<Tensor>> = Vec::new();
        for n in &nodes {
            for s in n.srcs() {
                let inside = nodes.iter().any(|m| m.id() == s.id()) || leafs.iter().any(|l| l.id() == s.id());
                if !inside {
                    leafs.push(s.clone());
                }
            }
        }
        Ok(Graph::from_parts(nodes, leafs))
    }

    /// The graph as text: every node and leaf with its sizes and op.
    pub fn print(&self) -> String {
        let mut s = String::from("=== GRAPH ===\n");
        let _ = writeln!(s, "n_nodes = {}", self.n_nodes());
        for (i, n) in self.nodes().iter().enumerate() {
            let mark = if n.flags() & Tensor::PARAM != 0 { "x" } else { " " };
            let _ = writeln!(s, " - {i:3}: {:<20} {:>16} {mark} {}", fmt_shape(&n.dims()), op_desc(n.op()), n.name());
        }
        let _ = writeln!(s, "n_leafs = {}", self.n_leafs());
        for (i, l) in self.leafs().iter().enumerate() {
            let _ = writeln!(s, " - {i:3}: {:<20} {:>16}   {}", fmt_shape(&l.dims()), "NONE", l.name());
        }
        s.push_str("========================================\n");
        s
    }

    /// The graph in Graphviz's DOT language: nodes (yellow for parameters,
    /// green for outputs, pink for leaves) and an edge from every source.
    pub fn dot(&self) -> String {
        let mut s = String::from("digraph G {\n  newrank = true;\n  rankdir = TB;\n");
        let label = |t: &Tensor, what: &str| {
            let name = t.name();
            let name = if name.is_empty() { format!("#{}", t.id()) } else { name.replace('"', "\\\"") };
            format!("{name} ({})|{what}|{}", t.dtype().name(), fmt_shape(&t.dims()))
        };
        for n in self.nodes() {
            let color = if n.flags() & Tensor::PARAM != 0 {
                "yellow"
            } else if n.flags() & Tensor::OUTPUT != 0 {
                "palegreen"
            } else {
                "white"
            };
            let _ = writeln!(
                s,
                "  \"t{}\" [ style = filled; fillcolor = {color}; shape = record; label = \"{}\"; ];",
                n.id(),
                label(n, &op_desc(n.op()))
            );
        }
        for l in self.leafs() {
            let _ = writeln!(
                s,
                "  \"t{}\" [ style = filled; fillcolor = pink; shape = record; label = \"{}\"; ];",
                l.id(),
                label(l, "NONE")
            );
        }
        for n in self.nodes() {
            for (j, src) in n.srcs().iter().enumerate() {
                let _ = writeln!(s, "  \"t{}\" -> \"t{}\" [ label = \"src{j}\"; ];", src.id(), n.id());
            }
        }
        s.push_str("}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;
    use crate::op::{Op, UnaryOp};
    use crate::tensor::{Context, TENSOR_OVERHEAD};

    #[test]
    fn lookups_views_and_text() {
        let ctx = Context::new(16 * TENSOR_OVERHEAD, true).unwrap();
        let a = ctx.new_tensor(DType::F32, &[4]).unwrap();
        a.set_name("a");
        let b = ctx.op(Op::Add, &[a.clone(), a.clone()]).unwrap();
        let c = ctx.op(Op::Mul, &[b.clone(), b.clone()]).unwrap();
        let d = ctx.op(Op::Unary(UnaryOp::Sqrt), &[c.clone()]).unwrap();
        d.set_name("d");
        d.set_flag(Tensor::OUTPUT);
        let g = Graph::build(&d).unwrap();
        assert_eq!(g.node(-1).unwrap().id(), d.id());
        assert_eq!(g.node(0).unwrap().id(), b.id());
        assert!(g.node(3).unwrap_err().to_string().contains("numbered 0 to 2"));
        assert_eq!(g.tensor_by_name("a").unwrap().id(), a.id());
        assert!(g.tensor_by_name("zz").is_none());
        let v = g.view(1, 3).unwrap();
        assert_eq!((v.n_nodes(), v.n_leafs()), (2, 1));
        assert_eq!(v.leafs()[0].id(), b.id());
        assert!(g.view(2, 5).is_err());
        let text = g.print();
        assert!(text.contains("n_nodes = 3") && text.contains("SQRT") && text.contains("n_leafs = 1"), "{text}");
        let dot = g.dot();
        assert!(dot.starts_with("digraph G {") && dot.contains("palegreen"), "{dot}");
        assert_eq!(dot.matches(" -> ").count(), 5);
    }
}
