//! Where a candidate sits in the space: five small indexes instead of the candidate itself, so
//! that a search can keep millions of priced candidates (12 bytes a place, 48 a candidate).

use super::space::{Block, Candidate};

/// A candidate's block, and its layout, sharding, recompute and inner combination there. Places
/// order as the space enumerates candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Place {
    block: u16,
    layout: u16,
    sharding: u16,
    recompute: u16,
    inner: u32,
}

/// Whether every candidate of `blocks` has a place: the space's lists fit the place's indexes.
/// The space's bounds keep them far inside (hundreds of blocks and layouts, tens of shardings and
/// recompute choices); a space that did not would be refused, never mis-addressed.
pub(crate) fn addressable(blocks: &[Block]) -> bool {
    let short = |len: usize| u16::try_from(len).is_ok();
    short(blocks.len())
        && blocks.iter().all(|block| {
            short(block.layouts.len())
                && short(block.shardings.len())
                && block.recomputes.iter().all(|list| short(list.len()))
                && u32::try_from(block.inner_len()).is_ok()
        })
}

/// An index of an addressable space (see [`addressable`]).
fn short(value: usize) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}

impl Place {
    /// The place of (block, layout, sharding, recompute, inner) in an addressable space.
    pub(crate) fn new(
        block: usize,
        layout: usize,
        sharding: usize,
        recompute: usize,
        inner: usize,
    ) -> Place {
        Place {
            block: short(block),
            layout: short(layout),
            sharding: short(sharding),
            recompute: short(recompute),
            inner: u32::try_from(inner).unwrap_or(u32::MAX),
        }
    }

    /// The block's index.
    pub(crate) fn block(self) -> usize {
        usize::from(self.block)
    }

    /// The layout's index in its block.
    pub(crate) fn layout(self) -> usize {
        usize::from(self.layout)
    }

    /// The sharding's index in its block.
    pub(crate) fn sharding(self) -> usize {
        usize::from(self.sharding)
    }

    /// The recompute choice's index in its layout's list.
    pub(crate) fn recompute(self) -> usize {
        usize::from(self.recompute)
    }

    /// The inner combination's index in its block.
    pub(crate) fn inner(self) -> usize {
        self.inner as usize
    }

    /// One number that orders places as they order: their indexes side by side, for sorting
    /// many of them by a single comparison each.
    pub(crate) fn key(self) -> u128 {
        let Place { block, layout, sharding, recompute, inner } = self;
        (u128::from(block) << 80)
            | (u128::from(layout) << 64)
            | (u128::from(sharding) << 48)
            | (u128::from(recompute) << 32)
            | u128::from(inner)
    }

    /// The candidate at this place of `blocks`.
    pub(crate) fn candidate(self, blocks: &[Block]) -> Candidate {
        blocks[self.block()].candidate(
            self.layout(),
            self.sharding(),
            usize::from(self.recompute),
            self.inner(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_12_bytes_and_orders_as_its_indexes() {
        assert_eq!(std::mem::size_of::<Place>(), 12);
        let a = Place::new(1, 2, 3, 4, 70_000);
        let b = Place::new(1, 2, 4, 0, 0);
        let c = Place::new(2, 0, 0, 0, 0);
        assert!(a < b && b < c);
        assert!(a.key() < b.key() && b.key() < c.key());
        let far =
            Place::new(u16::MAX.into(), u16::MAX.into(), 0, u16::MAX.into(), u32::MAX as usize);
        let next = Place::new(u16::MAX.into(), u16::MAX.into(), 1, 0, 0);
        assert!(far < next && far.key() < next.key());
        assert_eq!((a.block(), a.layout(), a.sharding(), a.inner()), (1, 2, 3, 70_000));
    }
}
