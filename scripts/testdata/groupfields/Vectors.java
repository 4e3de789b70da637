import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.charset.StandardCharsets;
import org.redisson.misc.Hash;

// Prints "<hex of input>\t<Redisson's field name>" for each input: the
// StringCodec encoding of each argument (its UTF-8 bytes), then the bytes
// 0, 1, ..., n-1 for n = 0..70.
public class Vectors {
    static void print(byte[] b) {
        ByteBuf buf = Unpooled.wrappedBuffer(b);
        StringBuilder hex = new StringBuilder();
        for (byte x : b) hex.append(String.format("%02x", x));
        System.out.println(hex + "\t" + Hash.hash128toBase64(buf));
    }
    public static void main(String[] args) {
        for (String s : args) print(s.getBytes(StandardCharsets.UTF_8));
        for (int n = 0; n <= 70; n++) {
            byte[] b = new byte[n];
            for (int i = 0; i < n; i++) b[i] = (byte) i;
            print(b);
        }
    }
}
