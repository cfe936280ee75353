package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.junit.jupiter.api.Test;

class DeliberateLossTest {
    @Test
    void offDropsNothing() {
        DeliberateLoss off = new DeliberateLoss(0);
        assertFalse(off.enabled());
        assertFalse(off.drops("{\"msg_id\": 10}"));
    }

    @Test
    void dropsExactlyTheMultiplesOfN() {
        DeliberateLoss every = new DeliberateLoss(5);
        long dropped = 0;
        for (int id = 1; id <= 100; id++) {
            if (every.drops("{\"msg_id\": " + id + ", \"sent_ms\": 1}")) {
                dropped++;
                assertEquals(0, id % 5);
            }
        }
        assertEquals(20, dropped);
    }

    @Test
    void neverDropsWhatHasNoIntegerMsgId() {
        DeliberateLoss every = new DeliberateLoss(1);
        assertFalse(every.drops("{oops"));
        assertFalse(every.drops("{\"msg_id\": \"10\"}"));
        assertFalse(every.drops("{\"msg_id\": 1.5}"));
        assertFalse(every.drops(null));
        assertTrue(every.drops("{\"msg_id\": 3}"));
    }

    @Test
    void refusesANegativeSetting() {
        assertThrows(IllegalArgumentException.class, () -> new DeliberateLoss(-1));
    }

    @Test
    void addsItsOption() {
        assertEquals(Set.of("bootstrap", "test-drop-every"), DeliberateLoss.withOption(Set.of("bootstrap")));
    }
}
