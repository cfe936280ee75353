package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.storm.Config;
import org.apache.storm.generated.Bolt;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.generated.Grouping;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.kafka.spout.FirstPollOffsetStrategy;
import org.apache.storm.kafka.spout.KafkaSpoutConfig;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.Utils;
import org.junit.jupiter.api.Test;

class StormAtLeastOnceTopologyTest {
    private static final String[] ARGS = {
        "--bootstrap", "k1:9092,k2:9092", "--input-topic", "in", "--output-topic", "out", "--group-id", "g",
    };

    @Test
    void parsesDefaults() {
        StormAtLeastOnceTopology.Options o = StormAtLeastOnceTopology.Options.parse(ARGS);
        assertEquals("streamlab-storm-in", o.name());
        assertEquals(2, o.workers());
        assertEquals(2, o.spoutParallelism());
        assertEquals(2, o.boltParallelism());
        assertEquals(2, o.ackers());
        assertEquals(30, o.messageTimeoutS());
        assertEquals(1000, o.maxSpoutPending());
        assertEquals(30_000L, o.offsetCommitPeriodMs());
    }

    @Test
    void parallelismDefaultsFollowWorkers() {
        StormAtLeastOnceTopology.Options o = StormAtLeastOnceTopology.Options.parse(append(ARGS,
                "--workers", "3", "--bolt-parallelism", "6", "--name", "t1"));
        assertEquals(3, o.spoutParallelism());
        assertEquals(6, o.boltParallelism());
        assertEquals(3, o.ackers());
        assertEquals("t1", o.name());
    }

    @Test
    void rejectsBadOptions() {
        assertThrows(IllegalArgumentException.class, () -> StormAtLeastOnceTopology.Options.parse(new String[] {"--bootstrap", "x"}));
        assertThrows(IllegalArgumentException.class, () -> StormAtLeastOnceTopology.Options.parse(append(ARGS, "--wrokers", "2")));
        assertThrows(IllegalArgumentException.class, () -> StormAtLeastOnceTopology.Options.parse(append(ARGS, "--ackers", "0")));
    }

    @Test
    void configSetsReliabilityKnobsOnly() {
        StormAtLeastOnceTopology.Options o = StormAtLeastOnceTopology.Options.parse(append(ARGS,
                "--workers", "3", "--message-timeout-s", "20", "--max-spout-pending", "500", "--ackers", "1"));
        Config conf = StormAtLeastOnceTopology.config(o);
        assertEquals(3, conf.get(Config.TOPOLOGY_WORKERS));
        assertEquals(20, conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS));
        assertEquals(500, conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING));
        assertEquals(1, conf.get(Config.TOPOLOGY_ACKER_EXECUTORS));
        assertEquals(4, conf.size());
        assertTrue(Utils.isValidConf(conf));
    }

    @Test
    void spoutIsAtLeastOnceFromCommittedOrEarliest() {
        KafkaSpoutConfig<String, String> spout =
                StormAtLeastOnceTopology.spoutConfig(StormAtLeastOnceTopology.Options.parse(ARGS));
        assertEquals(KafkaSpoutConfig.ProcessingGuarantee.AT_LEAST_ONCE, spout.getProcessingGuarantee());
        assertEquals(FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST, spout.getFirstPollOffsetStrategy());
        assertEquals("g", spout.getConsumerGroupId());
        Map<String, Object> props = spout.getKafkaProps();
        assertEquals(false, props.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG));
        assertEquals("earliest", props.get(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG));
        assertEquals("k1:9092,k2:9092", props.get(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG));
    }

    @Test
    void producerWaitsForAllReplicas() {
        Properties props = StormAtLeastOnceTopology.producerProperties(StormAtLeastOnceTopology.Options.parse(ARGS));
        assertEquals("all", props.get("acks"));
        assertEquals("k1:9092,k2:9092", props.get("bootstrap.servers"));
    }

    @Test
    void topologyIsSpoutEnrichKafkaBolt() {
        StormTopology topology = StormAtLeastOnceTopology.topology(StormAtLeastOnceTopology.Options.parse(append(ARGS,
                "--spout-parallelism", "3", "--bolt-parallelism", "4")));
        assertEquals(List.of(StormAtLeastOnceTopology.SPOUT_ID), List.copyOf(topology.get_spouts().keySet()));
        assertEquals(3, topology.get_spouts().get(StormAtLeastOnceTopology.SPOUT_ID).get_common().get_parallelism_hint());
        Bolt enrich = topology.get_bolts().get(StormAtLeastOnceTopology.ENRICH_ID);
        Bolt sink = topology.get_bolts().get(StormAtLeastOnceTopology.SINK_ID);
        assertEquals(4, enrich.get_common().get_parallelism_hint());
        assertEquals(4, sink.get_common().get_parallelism_hint());
        Map<GlobalStreamId, Grouping> enrichInputs = enrich.get_common().get_inputs();
        assertEquals(StormAtLeastOnceTopology.SPOUT_ID, enrichInputs.keySet().iterator().next().get_componentId());
        Map<GlobalStreamId, Grouping> sinkInputs = sink.get_common().get_inputs();
        assertEquals(StormAtLeastOnceTopology.ENRICH_ID, sinkInputs.keySet().iterator().next().get_componentId());
        assertTrue(enrich.get_common().get_streams().get(Utils.DEFAULT_STREAM_ID).get_output_fields()
                .containsAll(List.of("key", "message")));
    }

    @Test
    void translatorKeepsKeyValueAndPosition() {
        List<Object> tuple = new StormAtLeastOnceTopology.KeyValueTranslator()
                .apply(new ConsumerRecord<>("in", 2, 42L, null, "{\"msg_id\": 7}"));
        assertEquals(Arrays.asList(null, "{\"msg_id\": 7}", "in", 2, 42L), tuple);
        assertEquals(StormAtLeastOnceTopology.KeyValueTranslator.FIELDS.size(), tuple.size());
    }

    @Test
    void enrichBoltOutputsKeyAndMessage() throws Exception {
        Values out = StormAtLeastOnceTopology.EnrichBolt.process(null, "{\"msg_id\": 7, \"sent_ms\": 5}");
        assertEquals("7", out.get(0));
        JsonNode json = new ObjectMapper().readTree((String) out.get(1));
        assertEquals("storm", json.get("engine").asText());
        assertEquals(5, json.get("sent_ms").asInt());
        Values bad = StormAtLeastOnceTopology.EnrichBolt.process("k", "{oops");
        assertEquals("k", bad.get(0));
        assertEquals("{oops", new ObjectMapper().readTree((String) bad.get(1)).get("malformed").asText());
        assertNull(StormAtLeastOnceTopology.EnrichBolt.process(null, "nope").get(0));
    }

    private static String[] append(String[] base, String... extra) {
        String[] out = Arrays.copyOf(base, base.length + extra.length);
        System.arraycopy(extra, 0, out, base.length, extra.length);
        return out;
    }
}
