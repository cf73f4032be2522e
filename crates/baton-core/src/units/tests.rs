//! Tests for protocol units and safe cuts.
