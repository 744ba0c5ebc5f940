use super::{Fold, Lower};

pub fn find(_op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    None
}
