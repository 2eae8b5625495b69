//! The part of Perfetto's trace schema `--format perfetto` writes, declared by hand: only the
//! messages and fields used, with the numbers of Perfetto's `.proto` files (in its repository,
//! under `protos/perfetto/trace/`: `trace_packet.proto`, `clock_snapshot.proto`,
//! `trace_packet_defaults.proto`, `interned_data/interned_data.proto`,
//! `track_event/track_event.proto`, `track_descriptor.proto`, `process_descriptor.proto`,
//! `thread_descriptor.proto`, `debug_annotation.proto`), which are proto2: every scalar field is
//! `optional` (written when set, even to zero) and repeated scalars are not packed.
//!
//! A trace file is the `Trace` message, `repeated TracePacket packet = 1;`, written one packet
//! at a time: the byte 0x0a (field 1, length-delimited), the packet's length, the packet.

/// `TracePacket`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// `optional uint64 timestamp = 8;` in the packet's clock (see `TracePacketDefaults`).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `ClockSnapshot clock_snapshot = 6;`
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    /// `uint32 trusted_packet_sequence_id = 10;`: the packets that share interned data.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `TrackEvent track_event = 11;`
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `optional InternedData interned_data = 12;`
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `optional uint32 sequence_flags = 13;` ([`SEQ_INCREMENTAL_STATE_CLEARED`],
    /// [`SEQ_NEEDS_INCREMENTAL_STATE`]).
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// `optional TracePacketDefaults trace_packet_defaults = 59;`
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    /// `TrackDescriptor track_descriptor = 60;`
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`: interned data and defaults start
/// afresh with this packet.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`: the packet uses interned data.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `BuiltinClock.BUILTIN_CLOCK_REALTIME`.
pub const CLOCK_REALTIME: u32 = 1;
/// `BuiltinClock.BUILTIN_CLOCK_BOOTTIME`: trace processor's own trace time.
pub const CLOCK_BOOTTIME: u32 = 6;

/// `TracePacketDefaults`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacketDefaults {
    /// `optional uint32 timestamp_clock_id = 58;`
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

/// `ClockSnapshot`: the same moment on several clocks.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClockSnapshot {
    /// `repeated Clock clocks = 1;`
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// `optional BuiltinClock primary_trace_clock = 2;`
    #[prost(uint32, optional, tag = "2")]
    pub primary_trace_clock: Option<u32>,
}

/// `ClockSnapshot.Clock`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Clock {
    /// `optional uint32 clock_id = 1;`
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    /// `optional uint64 timestamp = 2;`
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

/// `TrackDescriptor`: a timeline that events refer to by `uuid`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// `optional uint64 uuid = 1;`
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `optional ProcessDescriptor process = 3;`: the track of a process.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// `optional ThreadDescriptor thread = 4;`: the track of a thread.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// `optional uint64 parent_uuid = 5;`
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// `ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `repeated string cmdline = 2;`
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    /// `optional string process_name = 6;`
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `optional int64 tid = 2;`
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    /// `optional string thread_name = 5;`
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// `repeated uint64 category_iids = 3;` (interned `EventCategory`).
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    /// `repeated DebugAnnotation debug_annotations = 4;`
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `optional Type type = 9;` ([`TYPE_SLICE_BEGIN`], [`TYPE_SLICE_END`], [`TYPE_INSTANT`]).
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// `uint64 name_iid = 10;` (interned `EventName`; of the oneof `name_field`).
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// `optional uint64 track_uuid = 11;`
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `repeated fixed64 flow_ids = 47;`: flows that start or pass here.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// `repeated fixed64 terminating_flow_ids = 48;`: flows that end here.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END`: ends the innermost open slice of its track.
pub const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type.TYPE_INSTANT`.
pub const TYPE_INSTANT: i32 = 3;

/// `DebugAnnotation`: a named argument of an event.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// `uint64 name_iid = 1;` (interned `DebugAnnotationName`; of the oneof `name_field`).
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// `uint64 uint_value = 3;` (of the oneof `value`).
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// `string string_value = 6;` (of the oneof `value`).
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    /// `repeated DebugAnnotation array_values = 12;`: an array of values.
    #[prost(message, repeated, tag = "12")]
    pub array_values: Vec<DebugAnnotation>,
}

/// `InternedData`: names sent once per sequence, referred to by iid afterwards.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// `repeated EventCategory event_categories = 1;`
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<Interned>,
    /// `repeated EventName event_names = 2;`
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<Interned>,
    /// `repeated DebugAnnotationName debug_annotation_names = 3;`
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<Interned>,
}

/// `EventCategory`, `EventName` and `DebugAnnotationName` alike: `optional uint64 iid = 1;
/// optional string name = 2;`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Interned {
    /// `optional uint64 iid = 1;` (never 0).
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// `optional string name = 2;`
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
