package streamlab;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.junit.jupiter.api.Test;

class ArgsTest {
    private static final Set<String> KNOWN = Set.of("n", "b", "c", "s");

    @Test
    void readsBothForms() {
        Args args = new Args(new String[] {"--n", "3", "--b=TRUE", "--c", "Park"}, KNOWN);
        assertEquals(3, args.getInt("n", 0));
        assertEquals(7L, args.getLong("s", 7L));
        assertTrue(args.getBoolean("b", false));
        assertEquals("park", args.getChoice("c", "x", Set.of("park", "progressive")));
        assertFalse(args.has("s"));
    }

    @Test
    void rejectsBadValuesWithTheOptionName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new Args(new String[] {"--n", "three"}, KNOWN).getInt("n", 0));
        assertTrue(e.getMessage().contains("--n"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new Args(new String[] {"--b", "1"}, KNOWN).getBoolean("b", false));
        assertThrows(IllegalArgumentException.class,
                () -> new Args(new String[] {"--c", "spin"}, KNOWN).getChoice("c", "park", Set.of("park")));
        assertThrows(IllegalArgumentException.class, () -> new Args(new String[] {"--x", "1"}, KNOWN));
        assertThrows(IllegalArgumentException.class, () -> new Args(new String[] {"--n"}, KNOWN));
        assertThrows(IllegalArgumentException.class, () -> new Args(new String[] {"n", "1"}, KNOWN));
    }
}
